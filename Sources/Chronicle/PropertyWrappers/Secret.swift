import ChronicleFormat
/// A property backed by a secret of a ``Store``: reads decrypt from the
/// secrets view, writes seal and append events.
///
/// ```swift
/// final class Session {
///     @Secret(.apiToken) var token
///     @Secret("auth.refresh") var refreshToken: String?
/// }
/// ```
@propertyWrapper
public struct Secret<Value: Codable & Sendable>: Sendable {
    /// The secret key.
    public let key: SecretKey<Value>
    /// The store the secret is read from and written to.
    public let store: Store

    /// Binds the property to a secret key.
    public init(_ key: SecretKey<Value>, store: Store = .standard) {
        self.key = key
        self.store = store
    }

    /// Binds the property to an optional secret named in place (`nil` until set).
    public init<Wrapped>(_ name: String, sync: SyncPolicy = .never, store: Store = .standard) where Value == Wrapped? {
        self.init(SecretKey(name, sync: sync), store: store)
    }

    /// Binds the property to a secret named in place; the initial value is its default.
    public init(wrappedValue: Value, _ name: String, sync: SyncPolicy = .never, store: Store = .standard) {
        self.init(SecretKey(name, default: wrappedValue, sync: sync), store: store)
    }

    /// The secret's value (its default when absent or unreadable; the error is
    /// logged without the value). Setting it seals and appends an event.
    public var wrappedValue: Value {
        get { store[key] }
        nonmutating set { store[key] = newValue }
    }

    /// Updates, reset, history and a get/set pair for UI code.
    public var projectedValue: KeyProjection<Value> {
        KeyProjection(store: store, read: { store[key] }, write: { store[key] = $0 }, key: key)
    }
}
