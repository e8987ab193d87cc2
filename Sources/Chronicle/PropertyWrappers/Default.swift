import ChronicleFormat
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
    public init(wrappedValue: Value, _ name: String, sync: SyncPolicy = .never, store: Store = .standard) {
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
