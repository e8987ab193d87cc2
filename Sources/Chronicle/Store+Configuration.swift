public import Foundation
public import Logging

/// How commits reach the disk. Chosen per store; the first `Store` opened on a
/// directory in a process sets it for every other one on that directory.
public enum Durability: Sendable, Hashable {
    /// Every commit is fsynced before `set`/`write` returns: an acknowledged
    /// change survives a crash of the process, of the OS, and a power loss.
    case durable
    /// Data pages are fsynced, the meta page is not (`MDB_NOMETASYNC`). A crash
    /// of the process loses nothing; a power loss can roll back the last
    /// commit (the store stays consistent).
    case noMetaSync
    /// Nothing is fsynced at commit (`MDB_NOSYNC`); a background flush runs
    /// every `flushInterval`. A crash of the process loses nothing; a power
    /// loss can lose every change since the last flush, and on file systems
    /// that reorder writes can damage the store.
    case noSync(flushInterval: Duration)
}

extension Store {
    /// Options for opening a store.
    ///
    /// ```swift
    /// var configuration = Store.Configuration()
    /// configuration.durability = .noMetaSync
    /// let store = try Store(directory: url, configuration: configuration)
    /// ```
    public struct Configuration: Sendable {
        /// Where the data key for sealed values comes from. `nil` uses a 0600
        /// key file created on first use under `$XDG_CONFIG_HOME/chronicle/`.
        public var keySource: KeySource?
        /// Seal plain values too, not only secrets.
        public var encryptDefaults: Bool
        /// How commits reach the disk. Default: ``Durability/durable``.
        public var durability: Durability
        /// Where the non-throwing API reports the errors it swallows. Secrets are never logged.
        public var logger: Logger
        /// The largest encoded value accepted, in bytes. Default 64 MiB.
        public var maxValueSize: Int
        /// The initial LMDB map size (address space only; the store grows it when full). Default 1 GiB.
        public var initialMapSize: Int

        /// Creates a configuration.
        public init(
            keySource: KeySource? = nil,
            encryptDefaults: Bool = false,
            durability: Durability = .durable,
            logger: Logger = Logger(label: "chronicle"),
            maxValueSize: Int = 64 << 20,
            initialMapSize: Int = 1 << 30
        ) {
            self.keySource = keySource
            self.encryptDefaults = encryptDefaults
            self.durability = durability
            self.logger = logger
            self.maxValueSize = maxValueSize
            self.initialMapSize = initialMapSize
        }
    }
}

/// Where a store's key-encryption key comes from.
public enum KeySource: Sendable {
    /// Derived from a passphrase with Argon2id (salt and limits stored in the store).
    case passphrase(String)
    /// Read from a file holding at least 32 random bytes (recommended for sync groups).
    case keyFile(URL)
    /// Supplied by your own code (a platform keychain, an HSM, a KMS).
    case provider(any KeyProvider)
}

/// An external source of the 32-byte key-encryption key.
public protocol KeyProvider: Sendable {
    /// Returns the 32-byte key-encryption key. Called when the store opens.
    func keyEncryptionKey() throws -> [UInt8]
}
