import ChronicleFormat
#if canImport(Security)
import ChronicleSodium
public import Foundation
import Security

/// Key material kept in the platform's keychain as a generic-password item, created (32 random
/// bytes) on first use: a key source that is not a file beside the data.
///
/// The item is `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`: readable by a background task
/// after the first unlock, never in a backup or on another device. A store restored from a backup
/// onto a new device therefore opens, but its secrets sealed with this key do not; a sync group
/// shares a passphrase or a key file instead.
///
/// Stores opened without a key source use `KeychainKeyProvider()` on Apple platforms (the default
/// key file elsewhere). Built only where the Security framework exists: the project's CI builds
/// and tests Linux, so this type is compiled by Apple toolchains alone.
public struct KeychainKeyProvider: KeyProvider {
    /// The item's service (`kSecAttrService`).
    public let service: String
    /// The item's account (`kSecAttrAccount`).
    public let account: String

    /// - Parameters:
    ///   - service: the keychain item's service.
    ///   - account: the keychain item's account.
    public init(service: String = "chronicle", account: String = "default.key") {
        self.service = service
        self.account = account
    }

    /// The item's 32 bytes, creating the item first when it does not exist.
    /// - Throws: ``ChronicleError/keyUnavailable(reason:)`` with the keychain's status.
    public func keyEncryptionKey() throws -> [UInt8] {
        if let existing = try read() { return existing }
        let material = Sodium.randomBytes(32)
        let attributes: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: account,
            kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
            kSecValueData as String: Data(material),
        ]
        let status = SecItemAdd(attributes as CFDictionary, nil)
        // Another process (or thread) added it first: use theirs, so every opener agrees.
        if status == errSecDuplicateItem, let existing = try read() { return existing }
        guard status == errSecSuccess else {
            throw ChronicleError.keyUnavailable(reason: "the keychain refused to add the item \(service)/\(account) (OSStatus \(status))")
        }
        return material
    }

    private func read() throws -> [UInt8]? {
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: account,
            kSecReturnData as String: true,
            kSecMatchLimit as String: kSecMatchLimitOne,
        ]
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess, let data = result as? Data else {
            throw ChronicleError.keyUnavailable(
                reason: "the keychain refused to read the item \(service)/\(account) (OSStatus \(status)); is the device locked?")
        }
        return [UInt8](data)
    }
}
#endif
