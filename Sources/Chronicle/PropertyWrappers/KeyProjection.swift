import ChronicleFormat
/// What `$property` gives for ``Default`` and ``Secret`` properties.
public struct KeyProjection<Value: Codable & Sendable>: Sendable {
    let store: Store
    private let read: @Sendable () -> Value
    private let write: @Sendable (Value) -> Void
    private let keys: AnyKey

    init(store: Store, read: @escaping @Sendable () -> Value, write: @escaping @Sendable (Value) -> Void, key: AnyKey) {
        self.store = store
        self.read = read
        self.write = write
        self.keys = key
    }

    /// The current value, then every change (as `Store.updates(of:)` gives it).
    public var updates: AsyncStream<Value> {
        switch keys {
        case let key as Key<Value>: store.updates(of: key)
        default: AsyncStream { $0.finish() }
        }
    }

    /// Removes the value (appends a remove event), so reads give the default again.
    /// Errors go to the store's logger.
    public func reset() {
        do {
            try store.commit([store.removal(of: keys)])
        } catch {
            store.log(error, "reset", keys)
        }
    }

    /// Every revision, oldest first.
    public var history: [Revision<Value>] {
        get throws(ChronicleError) {
            switch keys {
            case let key as Key<Value>: return try store.history(of: key)
            default: return []
            }
        }
    }

    /// Reads the current value (for UI bindings: `Binding(get: $x.get, set: $x.set)`).
    public func get() -> Value { read() }

    /// Writes a value (for UI bindings).
    public func set(_ value: Value) { write(value) }
}
