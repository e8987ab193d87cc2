/// The changes of one ``Store/write(_:)`` call, committed together in one transaction.
///
/// A batch collects changes; nothing is written until the closure returns.
/// A change that cannot be encoded makes the whole batch fail.
public final class Batch {
    let store: Store
    private(set) var changes: [PendingChange] = []
    private(set) var firstError: ChronicleError?

    init(store: Store) { self.store = store }

    /// Sets (or, for `nil`, removes) a key in the batch. Errors surface when `write` returns.
    public subscript<Value>(key: Key<Value>) -> Value {
        @available(*, unavailable, message: "a batch only collects changes; read from the store")
        get { key.defaultValue }
        set { record { () throws(ChronicleError) in try store.change(newValue, for: key) } }
    }

    /// Sets (or, for `nil`, removes) a secret in the batch. Errors surface when `write` returns.
    public subscript<Value>(key: SecretKey<Value>) -> Value {
        @available(*, unavailable, message: "a batch only collects changes; read from the store")
        get { key.defaultValue }
        set { record { () throws(ChronicleError) in try store.change(newValue, for: key) } }
    }

    /// Sets `key` to `value` in the batch.
    /// - Throws: ``ChronicleError`` at once when the value cannot be encoded or the key name is invalid.
    public func set<Value>(_ value: Value, for key: Key<Value>) throws(ChronicleError) {
        changes.append(try store.change(value, for: key))
    }

    /// Sets the secret `key` to `value` in the batch.
    public func set<Value>(_ value: Value, for key: SecretKey<Value>) throws(ChronicleError) {
        changes.append(try store.change(value, for: key))
    }

    /// Removes `key` in the batch.
    public func remove(_ key: Keys) throws(ChronicleError) {
        changes.append(try store.removal(of: key))
    }

    private func record(_ make: () throws(ChronicleError) -> PendingChange) {
        do {
            changes.append(try make())
        } catch {
            if firstError == nil { firstError = error }
        }
    }
}
