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
/// `@unchecked Sendable` is safe here: `Keys` and its subclasses (``Key`` and
/// ``SecretKey``, both final) have only `let` stored properties of `Sendable`
/// types, so an instance never changes after `init`. The class is not final
/// only so that static members declared on it are found through `Key<Value>`.
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
    public static let maxNameLength = 255

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

/// Where a key's changes may travel.
public enum SyncPolicy: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Never leaves this replica, not even through a relay (device-specific state, biometric locks).
    case never = 0
    /// Shipped only by an explicit `Replicator.sync()`.
    case manual = 1
    /// Pushed moments after the commit when small (100 KiB by default); larger
    /// values wait for the next `sync()`.
    case automaticSmall = 2

    public var description: String {
        switch self {
        case .never: "never"
        case .manual: "manual"
        case .automaticSmall: "automaticSmall"
        }
    }
}

/// The view a key lives in.
enum Domain: UInt8, Sendable, Hashable, CaseIterable {
    case defaults = 0
    case secrets = 1

    var name: String { self == .defaults ? "defaults" : "secrets" }
}

/// A typed key for a plain value, read from the defaults view.
///
/// ```swift
/// extension Keys {
///     static let theme = Key<Theme>("settings.theme", default: .system)
///     static let draft = Key<String?>("editor.draft", sync: .manual)   // defaults to nil
/// }
/// ```
public final class Key<Value: Codable & Sendable>: Keys, @unchecked Sendable {  // immutable: see Keys
    /// The value read when the key has never been set or was removed.
    public let defaultValue: Value

    /// Declares a key.
    /// - Parameters:
    ///   - name: The key's name in the store (1 to 255 UTF-8 bytes; checked on first use).
    ///   - defaultValue: The value read while the key has no value. Reading it writes nothing.
    ///   - sync: Which devices the key's changes travel to. Default: ``SyncPolicy/automaticSmall``.
    ///   - formerNames: Names the key had before a rename; their values are read until the key is set.
    public init(_ name: String, default defaultValue: Value, sync: SyncPolicy = .automaticSmall, formerNames: [String] = []) {
        self.defaultValue = defaultValue
        super.init(name: name, domain: .defaults, sync: sync, formerNames: formerNames)
    }

    /// Declares a key whose value is optional; it reads `nil` until set.
    public init<Wrapped>(_ name: String, sync: SyncPolicy = .automaticSmall, formerNames: [String] = [])
    where Value == Wrapped? {
        self.defaultValue = nil
        super.init(name: name, domain: .defaults, sync: sync, formerNames: formerNames)
    }
}

/// A typed key for a secret, sealed with the store's data key and read from the secrets view.
///
/// Secrets never sync unless asked (`sync:` defaults to ``SyncPolicy/never``),
/// never appear in plaintext on disk, in logs, in errors or in a `description`.
///
/// ```swift
/// extension Keys {
///     static let apiToken = SecretKey<String?>("auth.token")
/// }
/// try store.set("s3cr3t", for: .apiToken)
/// ```
public final class SecretKey<Value: Codable & Sendable>: Keys, @unchecked Sendable {  // immutable: see Keys
    /// The value read when the secret has never been set or was removed.
    public let defaultValue: Value

    /// Declares a secret key.
    /// - Parameters:
    ///   - name: The key's name (1 to 255 UTF-8 bytes). Names are not secret.
    ///   - defaultValue: The value read while the secret has no value.
    ///   - sync: Which devices the sealed secret travels to. Default: ``SyncPolicy/never``.
    ///   - formerNames: Names the key had before a rename.
    public init(_ name: String, default defaultValue: Value, sync: SyncPolicy = .never, formerNames: [String] = []) {
        self.defaultValue = defaultValue
        super.init(name: name, domain: .secrets, sync: sync, formerNames: formerNames)
    }

    /// Declares a secret key whose value is optional; it reads `nil` until set.
    public init<Wrapped>(_ name: String, sync: SyncPolicy = .never, formerNames: [String] = [])
    where Value == Wrapped? {
        self.defaultValue = nil
        super.init(name: name, domain: .secrets, sync: sync, formerNames: formerNames)
    }
}
