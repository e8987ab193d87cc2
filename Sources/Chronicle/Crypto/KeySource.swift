import ChronicleFormat
public import Foundation
import ChronicleSodium

/// Where a store's key-encryption key comes from.
///
/// Descriptions, debug descriptions and mirrors (`print`, `dump`, the debugger) never show a
/// passphrase. An open ``Store`` keeps none: its ``Store/configuration`` holds a redacted
/// placeholder once the keyring is open (the passphrase itself lives on only in secure memory).
public enum KeySource: Sendable {
    /// Derived from a passphrase with Argon2id (salt and limits stored in the store).
    case passphrase(String)
    /// Read from a file holding at least 32 random bytes (recommended for sync groups).
    case keyFile(URL)
    /// Supplied by your own code (a platform keychain, an HSM, a KMS).
    case provider(any KeyProvider)

    /// What an open store keeps in place of its passphrase.
    static let redactedPassphrase = "\u{0}chronicle: passphrase not kept"

    /// This source without its secret: a passphrase becomes the redacted placeholder.
    var redacted: KeySource {
        if case .passphrase = self { return .passphrase(Self.redactedPassphrase) }
        return self
    }
}

extension KeySource: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `passphrase(<redacted>)`, `keyFile(PATH)` or `provider(TYPE)`.
    public var description: String {
        switch self {
        case .passphrase: "passphrase(<redacted>)"
        case let .keyFile(url): "keyFile(\(url.path))"
        case let .provider(provider): "provider(\(type(of: provider)))"
        }
    }

    /// The same as ``description``: nothing secret.
    public var debugDescription: String { description }

    /// A mirror without the passphrase (`dump` and the debugger show the description).
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .enum) }
}
