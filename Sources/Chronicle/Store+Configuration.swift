public import Foundation
import Sodium
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
        /// The Argon2id cost of turning a passphrase into a key. Default ``KeyDerivationCost/interactive``.
        public var keyDerivationCost: KeyDerivationCost
        /// How far ahead of the local clock a received event may be stamped and
        /// still enter the views at once. Later ones are stored and relayed but
        /// wait until local time reaches them. Default one hour.
        public var maxClockDrift: Duration

        /// Creates a configuration.
        public init(
            keySource: KeySource? = nil,
            encryptDefaults: Bool = false,
            durability: Durability = .durable,
            logger: Logger = Logger(label: "chronicle"),
            maxValueSize: Int = 64 << 20,
            initialMapSize: Int = 1 << 30,
            keyDerivationCost: KeyDerivationCost = .interactive,
            maxClockDrift: Duration = .seconds(3600)
        ) {
            self.maxClockDrift = maxClockDrift
            self.keyDerivationCost = keyDerivationCost
            self.keySource = keySource
            self.encryptDefaults = encryptDefaults
            self.durability = durability
            self.logger = logger
            self.maxValueSize = maxValueSize
            self.initialMapSize = initialMapSize
        }
    }
}

/// The Argon2id cost of deriving a key from a passphrase. Stored with the salt,
/// so a store opens with the cost it was created with.
public struct KeyDerivationCost: Sendable, Hashable {
    /// Number of passes.
    public var passes: UInt64
    /// Memory in bytes.
    public var memoryBytes: UInt64

    /// Creates a cost from explicit values (libsodium accepts at least 1 pass and 8 KiB).
    public init(passes: UInt64, memoryBytes: UInt64) {
        self.passes = passes
        self.memoryBytes = memoryBytes
    }

    /// 2 passes over 64 MiB: about 0.1 s on a current core. The default.
    public static let interactive = KeyDerivationCost(limits: .interactive)
    /// 3 passes over 256 MiB: about 0.5–1 s. Used for keys that travel between devices.
    public static let moderate = KeyDerivationCost(limits: .moderate)
    /// 4 passes over 1 GiB: several seconds; for vaults opened rarely.
    public static let sensitive = KeyDerivationCost(limits: .sensitive)
    /// The smallest cost libsodium accepts. Only for tests: it protects nothing.
    public static let minimumForTesting = KeyDerivationCost(limits: .minimum)

    init(limits: PasswordHash.Limits) {
        passes = limits.opsLimit
        memoryBytes = limits.memLimit
    }

    var limits: PasswordHash.Limits { PasswordHash.Limits(opsLimit: passes, memLimit: memoryBytes) }
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
