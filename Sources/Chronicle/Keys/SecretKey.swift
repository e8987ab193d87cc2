import ChronicleFormat
/// A key whose value is a secret: sealed with the store's data key, kept in the secrets view.
///
/// A `SecretKey` is a ``Key``, so every call that takes a key takes it; ``Secret`` takes only a
/// `SecretKey`, so a property declared `@Secret` can never be stored in plaintext.
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
public final class SecretKey<Value: Codable & Sendable>: Key<Value>, @unchecked Sendable {  // immutable: see AnyKey
    /// Declares a secret key.
    /// - Parameters:
    ///   - name: The key's name (1 to 255 UTF-8 bytes). Names are not secret.
    ///   - defaultValue: The value read while the secret has no value.
    ///   - sync: Which devices the sealed secret travels to. Default: ``SyncPolicy/never``.
    ///   - formerNames: Names the key had before a rename.
    public init(_ name: String, default defaultValue: Value, sync: SyncPolicy = .never, formerNames: [String] = []) {
        super.init(name: name, domain: .secrets, defaultValue: defaultValue, sync: sync, formerNames: formerNames)
    }

    /// Declares a secret key with its retention: how many sealed revisions the store keeps
    /// (``Retention/latest`` keeps no overwritten secret).
    /// - Parameters:
    ///   - name: The key's name (1 to 255 UTF-8 bytes). Names are not secret.
    ///   - defaultValue: The value read while the secret has no value.
    ///   - sync: Which devices the sealed secret travels to. Default: ``SyncPolicy/never``.
    ///   - retention: How many revisions the store keeps.
    ///   - formerNames: Names the key had before a rename.
    public init(_ name: String, default defaultValue: Value, sync: SyncPolicy = .never, retention: Retention, formerNames: [String] = []) {
        super.init(name: name, domain: .secrets, defaultValue: defaultValue, sync: sync, retention: retention, formerNames: formerNames)
    }

    /// Declares a secret key whose value is optional, with its retention; it reads `nil` until set.
    public init<Wrapped>(_ name: String, sync: SyncPolicy = .never, retention: Retention, formerNames: [String] = [])
    where Value == Wrapped? {
        super.init(name: name, domain: .secrets, defaultValue: nil, sync: sync, retention: retention, formerNames: formerNames)
    }

    /// Declares a secret key whose value is optional; it reads `nil` until set.
    public init<Wrapped>(_ name: String, sync: SyncPolicy = .never, formerNames: [String] = [])
    where Value == Wrapped? {
        super.init(name: name, domain: .secrets, defaultValue: nil, sync: sync, formerNames: formerNames)
    }
}
