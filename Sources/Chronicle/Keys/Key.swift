import ChronicleFormat
/// A typed key: its name, its type, its default and its sync policy.
///
/// Every entry point of the store takes a `Key`: `store[key]`, `value(for:)`, `set(_:for:)`,
/// `remove(_:)`, `update(_:_:)`, `history(of:)`, `updates(of:)`, a batch's subscript. A
/// ``SecretKey`` is a `Key` whose value is sealed, so it goes through the same calls.
///
/// ```swift
/// extension Keys {
///     static let theme = Key<Theme>("settings.theme", default: .system)
///     static let draft = Key<String?>("editor.draft", sync: .manual)   // defaults to nil
///     static let layout = Key<String>("ui.layout", default: "grid")      // stays on this device
/// }
/// ```
public class Key<Value: Codable & Sendable>: AnyKey, @unchecked Sendable {  // immutable: see AnyKey
    /// The value read when the key has never been set or was removed.
    public let defaultValue: Value

    /// Declares a key.
    /// - Parameters:
    ///   - name: The key's name in the store (1 to 255 UTF-8 bytes; checked on first use).
    ///   - defaultValue: The value read while the key has no value. Reading it writes nothing.
    ///   - sync: Which devices the key's changes travel to. Default: ``SyncPolicy/never``: a key
    ///     stays on its device unless it says otherwise (syncing is opt-in, per key).
    ///   - formerNames: Names the key had before a rename; their values are read until the key is set.
    public convenience init(_ name: String, default defaultValue: Value, sync: SyncPolicy = .never, formerNames: [String] = []) {
        self.init(name: name, domain: .defaults, defaultValue: defaultValue, sync: sync, formerNames: formerNames)
    }

    /// Declares a key whose value is optional; it reads `nil` until set.
    public convenience init<Wrapped>(_ name: String, sync: SyncPolicy = .never, formerNames: [String] = [])
    where Value == Wrapped? {
        self.init(name: name, domain: .defaults, defaultValue: nil, sync: sync, formerNames: formerNames)
    }

    /// Declares a key with its retention: how many revisions the store keeps.
    ///
    /// ```swift
    /// static let position = Key<Int>("reader.position", default: 0, retention: .latest)
    /// static let plan = Key<String>("billing.plan", default: "free", sync: .manual, retention: .forever)
    /// ```
    /// - Parameters:
    ///   - name: The key's name in the store (1 to 255 UTF-8 bytes; checked on first use).
    ///   - defaultValue: The value read while the key has no value.
    ///   - sync: Which devices the key's changes travel to. Default: ``SyncPolicy/never``.
    ///   - retention: How many revisions the store keeps (``Retention/forever`` for keys an app
    ///     audits); older ones are dropped by the store itself.
    ///   - formerNames: Names the key had before a rename.
    public convenience init(
        _ name: String, default defaultValue: Value, sync: SyncPolicy = .never, retention: Retention, formerNames: [String] = []
    ) {
        self.init(name: name, domain: .defaults, defaultValue: defaultValue, sync: sync, retention: retention, formerNames: formerNames)
    }

    /// Declares a key whose value is optional, with its retention; it reads `nil` until set.
    public convenience init<Wrapped>(_ name: String, sync: SyncPolicy = .never, retention: Retention, formerNames: [String] = [])
    where Value == Wrapped? {
        self.init(name: name, domain: .defaults, defaultValue: nil, sync: sync, retention: retention, formerNames: formerNames)
    }

    /// A key of `domain` (the defaults, or the sealed secrets of a ``SecretKey``).
    init(name: String, domain: Domain, defaultValue: Value, sync: SyncPolicy, retention: Retention? = nil, formerNames: [String]) {
        self.defaultValue = defaultValue
        super.init(name: name, domain: domain, sync: sync, retention: retention, formerNames: formerNames)
    }
}
