import ChronicleFormat
import ChronicleLog
/// The base class of typed keys, and the namespace you extend to declare them.
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
/// `@unchecked Sendable` is safe here: `Keys` and its subclasses (``Key`` and its
/// final subclass ``SecretKey``; neither is open, so no other subclass exists) have only
/// `let` stored properties of `Sendable` types, so an instance never changes after
/// `init`. The class is not final only so that static members declared on it are found
/// through `Key<Value>`.
public class Keys: @unchecked Sendable, CustomStringConvertible {
    /// The key's name in the store: 1 to 255 UTF-8 bytes.
    public let name: String
    /// Which devices the key's changes travel to.
    public let sync: SyncPolicy
    /// Older names of this key: when the key has no value under ``name``,
    /// reads fall back to the newest value under these names.
    public let formerNames: [String]
    let domain: Domain

    init(name: String, domain: Domain, sync: SyncPolicy, formerNames: [String]) {
        self.name = name
        self.domain = domain
        self.sync = sync
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
