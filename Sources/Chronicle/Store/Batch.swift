import ChronicleFormat
import ChronicleLog
/// The changes of one ``Store/write(_:)`` call, committed together in one transaction.
///
/// A batch collects changes; nothing is written until the closure returns.
/// A change that cannot be encoded makes the whole batch fail. Reading a key through the batch
/// gives the batch's own change of it, else the store's value: read-your-writes inside the
/// batch. (An increment that must not lose another writer's update is ``Store/update(_:_:)-(Key<Value>,_)``.)
public final class Batch {
    let store: Store
    private(set) var changes: [PendingChange] = []
    private(set) var firstError: ChronicleError?

    init(store: Store) { self.store = store }

    /// The batch's own change of `key`, else the store's value; sets (or, for `nil`, removes)
    /// `key` in the batch. Errors surface when `write` returns.
    public subscript<Value>(key: Key<Value>) -> Value {
        get { read(key) }
        set { record { () throws(ChronicleError) in try store.change(newValue, for: key) } }
    }

    /// Sets `key` to `value` in the batch.
    /// - Throws: ``ChronicleError`` at once when the value cannot be encoded or the key name is invalid.
    public func set<Value>(_ value: Value, for key: Key<Value>) throws(ChronicleError) {
        changes.append(try store.change(value, for: key))
    }

    /// Removes `key` in the batch.
    public func remove(_ key: AnyKey) throws(ChronicleError) {
        changes.append(try store.removal(of: key))
    }

    /// The value of the batch's last change of `key`, else the store's value (errors read as the
    /// default and surface when `write` returns, as a failed read of the store does).
    private func read<K: ValueKey>(_ key: K) -> K.Value {
        let name = KeyName(key.name)  // by its bytes: a canonically equivalent spelling is another key
        guard let change = changes.last(where: { $0.domain == key.domain && KeyName($0.key) == name }) else { return store.loggingRead(key) }
        guard change.op == .set else { return key.defaultValue }
        do {
            return try ValueCoder.decode(K.Value.self, encoding: change.encoding, payload: change.payload, key: key.name)
        } catch {
            if firstError == nil { firstError = error }
            return key.defaultValue
        }
    }

    private func record(_ make: () throws(ChronicleError) -> PendingChange) {
        do {
            changes.append(try make())
        } catch {
            if firstError == nil { firstError = error }
        }
    }
}
