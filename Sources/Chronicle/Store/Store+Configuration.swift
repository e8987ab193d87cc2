import ChronicleLog
import ChronicleFormat
import Foundation
import ChronicleSodium
public import Logging

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
        /// key file created on first use under `$XDG_CONFIG_HOME/chronicle/` (on Apple
        /// platforms, a device-only keychain item: `KeychainKeyProvider`).
        public var keySource: KeySource?
        /// Seal plain values too, not only secrets.
        public var encryptDefaults: Bool
        /// How commits reach the disk. Default: ``Durability/durable``.
        public var durability: Durability
        /// Where the non-throwing API reports the errors it swallows. Secrets are never logged.
        public var logger: Logger
        /// The largest encoded value accepted, in bytes: set here, or received from a peer (a
        /// received event with a larger value is quarantined, never applied). Default 64 MiB.
        public var maxValueSize: Int
        /// The initial LMDB map size (address space only; the store grows it when full). Default 1 GiB.
        public var initialMapSize: Int
        /// The Argon2id cost of turning a passphrase into a key. Default ``KeyDerivationCost/interactive``.
        public var keyDerivationCost: KeyDerivationCost
        /// How far ahead of the local clock a received event may be stamped and
        /// still enter the views at once. Later ones are stored and relayed but
        /// wait until local time reaches them. Default one hour.
        public var maxClockDrift: Duration
        /// The Argon2id cost at which passphrase-wrapped keys leave the store (ranges, mailboxes,
        /// exports, HTTP), and the least a received one may have. Always ``KeyDerivationCost/moderate``
        /// outside the project's own tests, which lower it to stay fast.
        var travelKeyCost: KeyDerivationCost = .moderate
        /// The most Argon2id derivations per minute this store runs for key records that peers
        /// send (a new member's key costs one), whatever they send: records past it wait for a
        /// later import, never refused. Derivations of received records also run one at a time.
        /// Default 16.
        public var maxReceivedKeyDerivationsPerMinute: Int = 16
        /// How many revisions a key keeps when it declares no ``Retention`` of its own. The store
        /// drops older ones by itself, in short steps after writes; a key's current value never
        /// changes for it.
        ///
        /// A store remembers the default it was last opened with, so a tool (`chronicle`) or an
        /// open that sets none applies the app's. `nil` (the default): the one the store
        /// remembers, else ``Retention/standard``, the newest 100.
        public var retention: Retention?
        /// Opened by ``StoreSalvage/copyWhatVerifies(of:into:configuration:)``: no refusal, no maintenance,
        /// no key made (a snapshot of a damaged store, never the store itself).
        var salvage = false

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

extension Store.Configuration {
    /// What the log takes of this configuration.
    var logOptions: LogOptions {
        LogOptions(
            initialMapSize: initialMapSize, maxClockDrift: maxClockDrift, maxValueSize: maxValueSize, logger: logger, durability: durability,
            retention: retention, salvage: salvage)
    }
}

extension Store.Configuration {
    /// What the keyring takes of this configuration.
    var keyringOptions: Keyring.Options {
        Keyring.Options(
            keySource: keySource, keyDerivationCost: keyDerivationCost, travelKeyCost: travelKeyCost,
            maxReceivedKeyDerivationsPerMinute: maxReceivedKeyDerivationsPerMinute, salvage: salvage)
    }
}
