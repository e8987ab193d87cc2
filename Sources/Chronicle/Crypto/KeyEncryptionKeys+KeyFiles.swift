import ChronicleFormat
import ChronicleLog
import ChronicleSodium
import Foundation
import Synchronization

extension KeyEncryptionKeys {
    // MARK: - Key files

    /// Where the key material of a store opened without a key source lives: in the keychain
    /// where the platform has one (Apple's: a device-only item, never in a backup of the app's
    /// data), else in the default key file.
    static func defaultSource() -> Source {
        #if canImport(Security)
        return .defaultKeychain(KeychainKeyProvider())
        #else
        return .defaultKeyFile(defaultKeyFileURL())
        #endif
    }

    /// The default key file: `$XDG_CONFIG_HOME/chronicle/default.key`, else `~/.config/chronicle/default.key`.
    static func defaultKeyFileURL() -> URL {
        let environment = ProcessInfo.processInfo.environment
        let base: URL
        if let config = environment["XDG_CONFIG_HOME"], !config.isEmpty {
            base = URL(fileURLWithPath: config, isDirectory: true)
        } else {
            // NSHomeDirectory, not homeDirectoryForCurrentUser: the latter does not exist on iOS.
            base = URL(fileURLWithPath: NSHomeDirectory(), isDirectory: true).appendingPathComponent(".config", isDirectory: true)
        }
        return base.appendingPathComponent("chronicle/default.key")
    }

    #if canImport(Security)
    /// The KEK from the default keychain item's material (derived as a key file's is).
    static func keychainKEK(_ keychain: KeychainKeyProvider) throws -> SecureBytes {
        var bytes = try keychain.keyEncryptionKey()
        defer { Sodium.wipe(&bytes) }
        return try derivedKEK(from: bytes, kind: .keyFile)
    }
    #endif

    /// A KEK from key material of any length ≥ 32 bytes (BLAKE2b with a domain label).
    static func derivedKEK(from material: [UInt8], kind: KeyEncryptionKind) throws -> SecureBytes {
        var digest = GenericHash.hash([Array("chronicle.kek.v1".utf8), [kind.rawValue], material], length: 32)
        defer { Sodium.wipe(&digest) }
        return try SecureBytes(digest)
    }

    /// Reads a key file (at least 32 bytes), creating a random 0600 one when asked and missing.
    static func readKeyFile(_ url: URL, createIfMissing: Bool = false) throws -> SecureBytes {
        if createIfMissing, !FileManager.default.fileExists(atPath: url.path) {
            try createKeyFile(url)
        }
        var bytes = try SecretFile.contents(of: url, what: "key file")
        defer { Sodium.wipe(&bytes) }
        guard bytes.count >= 32 else {
            throw ChronicleError.invalidArgument("the key file \(url.path) holds \(bytes.count) bytes; it needs at least 32 random bytes")
        }
        return try derivedKEK(from: bytes, kind: .keyFile)
    }

    /// Creates a key file of 32 random bytes, atomically: a new 0600 file opened with
    /// `O_EXCL|O_NOFOLLOW` (never through a wider mode), fsynced, linked into place, and its
    /// folder (created 0700 when missing) fsynced.
    static func createKeyFile(_ url: URL) throws {
        var random = Sodium.randomBytes(32)
        defer { Sodium.wipe(&random) }
        // Never replaces a key file another process made first: that one is the key.
        try PrivateFiles.publishNew(random, at: url)
    }
}
