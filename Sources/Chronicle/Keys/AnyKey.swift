import ChronicleFormat
/// The namespace you extend to declare keys.
///
/// Declare keys once, as static members of an extension, and use them with
/// leading-dot syntax everywhere (the pattern of `Notification.Name`):
///
/// ```swift
/// extension Keys {
///     static let theme    = Key<Theme>("settings.theme", default: .system)
///     static let launches = Key<Int>("stats.launches", default: 0, sync: .never)
///     static let apiToken = SecretKey<String?>("auth.token")
/// }
/// store[.theme] = .dark
/// ```
///
/// `Keys` names ``AnyKey``, the base class of every key: Swift finds `.theme` for a parameter of
/// type `Key<Theme>` only among the static members of `Key<Theme>` and its superclasses, so the
/// namespace must be that superclass. The two names say which role a use plays: extend `Keys`;
/// take `AnyKey` where any key of any type will do (``Store/reset(_:)``).
public typealias Keys = AnyKey

/// Any key, whatever its value's type: the base class of ``Key`` (and so of ``SecretKey``).
///
/// Entry points that do not read or write a value take it: ``Store/reset(_:)``,
/// ``Store/hasValue(for:)``, ``Batch/remove(_:)``, ``Store/importValues(from:keys:)``.
///
/// `@unchecked Sendable` is safe here: `AnyKey` and its subclasses (``Key`` and its
/// final subclass ``SecretKey``; neither is open, and `AnyKey`'s initializer is internal, so no
/// other subclass exists) have only `let` stored properties of `Sendable` types, so an instance
/// never changes after `init`. The class is not final only so that static members declared on
/// it (through ``Keys``) are found through `Key<Value>`.
public class AnyKey: @unchecked Sendable, CustomStringConvertible {
    /// The key's name in the store: 1 to 255 UTF-8 bytes.
    public let name: String
    /// Which devices the key's changes travel to.
    public let sync: SyncPolicy
    /// Older names of this key: when the key has no value under ``name``,
    /// reads fall back to the newest value under these names.
    public let formerNames: [String]
    /// How many revisions of the key the store keeps; `nil`: the store's default
    /// (``Store/Configuration/retention``, the newest 100 unless configured).
    public let retention: Retention?
    let domain: Domain

    init(name: String, domain: Domain, sync: SyncPolicy, retention: Retention? = nil, formerNames: [String]) {
        self.name = name
        self.domain = domain
        self.sync = sync
        self.retention = retention
        self.formerNames = formerNames
    }

    public var description: String { "\(domain == .secrets ? "SecretKey" : "Key")(\"\(name)\", sync: \(sync))" }

    /// The longest key name, in UTF-8 bytes.
    public static let maxNameLength = Event.maxKeyNameLength

    /// Checks that `name` is a usable key name.
    /// - Throws: ``ChronicleError/invalidKeyName(_:reason:)`` when it is empty or over 255 UTF-8 bytes.
    static func validate(name: String) throws(ChronicleError) {
        let length = name.utf8.count
        if length == 0 { throw .invalidKeyName(name, reason: "a key name cannot be empty") }
        if length > maxNameLength {
            throw .invalidKeyName(name, reason: "\(length) UTF-8 bytes, over the limit of \(maxNameLength)")
        }
    }
}
