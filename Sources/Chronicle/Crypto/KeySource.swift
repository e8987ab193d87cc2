public import Foundation
import ChronicleSodium

/// Where a store's key-encryption key comes from.
public enum KeySource: Sendable {
    /// Derived from a passphrase with Argon2id (salt and limits stored in the store).
    case passphrase(String)
    /// Read from a file holding at least 32 random bytes (recommended for sync groups).
    case keyFile(URL)
    /// Supplied by your own code (a platform keychain, an HSM, a KMS).
    case provider(any KeyProvider)
}
