/// A property backed by a key of a ``Store``: reads come from the defaults
/// view, writes append events.
///
/// ```swift
/// final class Settings {
///     @Default(.theme) var theme                     // typed key
///     @Default("legacy.flag") var flag = false       // stringly form: the initial value is the default
/// }
/// settings.theme = .dark
/// for await theme in settings.$theme.updates { … }
/// settings.$theme.reset()
/// ```
///
/// Works in classes and structs (the setter is `nonmutating`). Every wrapper
/// on a key, in any object, hears every change of the key: observation lives
/// in the store, not in the wrapper.
@propertyWrapper
public struct Default<Value: Codable & Sendable>: Sendable {
    /// The key.
    public let key: Key<Value>
    /// The store the key is read from and written to.
    public let store: Store

    /// Binds the property to a typed key.
    /// - Parameters:
    ///   - key: The key.
    ///   - store: The store; default ``Store/standard``.
    public init(_ key: Key<Value>, store: Store = .standard) {
        self.key = key
        self.store = store
    }

    /// Binds the property to a key named in place; the initial value is its default.
    public init(wrappedValue: Value, _ name: String, sync: SyncPolicy = .automaticSmall, store: Store = .standard) {
        self.init(Key(name, default: wrappedValue, sync: sync), store: store)
    }

    /// The key's value (its default when absent). Setting it appends an event;
    /// errors go to the store's logger.
    public var wrappedValue: Value {
        get { store[key] }
        nonmutating set { store[key] = newValue }
    }

    /// Updates, reset, history and a get/set pair for UI code.
    public var projectedValue: KeyProjection<Value> {
        KeyProjection(store: store, read: { store[key] }, write: { store[key] = $0 }, key: key)
    }
}

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

/// What `$property` gives for ``Default`` and ``Secret`` properties.
public struct KeyProjection<Value: Codable & Sendable>: Sendable {
    let store: Store
    private let read: @Sendable () -> Value
    private let write: @Sendable (Value) -> Void
    private let keys: Keys

    init(store: Store, read: @escaping @Sendable () -> Value, write: @escaping @Sendable (Value) -> Void, key: Keys) {
        self.store = store
        self.read = read
        self.write = write
        self.keys = key
    }

    /// The current value, then every change (see ``Store/updates(of:)-(Key<Value>)``).
    public var updates: AsyncStream<Value> {
        switch keys {
        case let key as Key<Value>: store.updates(of: key)
        case let key as SecretKey<Value>: store.updates(of: key)
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
            case let key as SecretKey<Value>: return try store.history(of: key)
            default: return []
            }
        }
    }

    /// Reads the current value (for UI bindings: `Binding(get: $x.get, set: $x.set)`).
    public func get() -> Value { read() }

    /// Writes a value (for UI bindings).
    public func set(_ value: Value) { write(value) }
}
