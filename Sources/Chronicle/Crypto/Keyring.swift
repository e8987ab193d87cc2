import ChronicleFormat
import ChronicleLog
import Foundation
import ChronicleSodium
import Synchronization

/// The data keys of a store, unwrapped with the key-encryption key (KEK) that
/// the store's ``KeySource`` gives.
///
/// Wrapped keys live in `meta` (`dk/<id>`, with `dk.active` naming the key new
/// events are sealed with). Unwrapped keys live in `sodium_malloc`ed memory
/// and are zeroed when the keyring goes away.
final class Keyring: EventSealer {
    /// Where key-encryption keys come from (``KeyEncryptionKeys/Source``).
    typealias Source = KeyEncryptionKeys.Source

    struct State: ~Copyable {
        var dataKeys: [KeyID: SecureBytes] = [:]
        /// Authentication subkeys of data keys, by data key id.
        var authenticationKeys: [KeyID: KeyedHash] = [:]
        /// The salt of this keyring's travel wraps (one per keyring, so one Argon2id run).
        var travelSalt: [UInt8]?
        /// The salt the first data key of a passphrase store is wrapped under, its KEK derived
        /// before the write transaction that creates the key.
        var firstKeySalt: [UInt8]?
    }

    let state: Mutex<State>
    /// The log's key records: all the keyring holds of the log.
    let keyRecords: KeyRecords
    /// `true` when the store was opened with an explicit key source: a member of a sync
    /// group, which authenticates every event it writes and verifies every event it imports.
    let isMember: Bool
    /// The Argon2id cost at which passphrase-wrapped keys travel, and the least accepted from a peer.
    let travelLimits: PasswordHash.Limits
    /// The key-encryption keys: their source, those derived, and what deriving them for records
    /// peers sent may cost.
    let keks: KeyEncryptionKeys
    /// What deriving keys for records peers sent may cost, and the KEKs it derived.
    var received: ReceivedDerivations { keks.received }

    private init(keyRecords: KeyRecords, source: Source, isMember: Bool, travelLimits: PasswordHash.Limits, receivedDerivationsPerMinute: Int) {
        self.keyRecords = keyRecords
        self.state = Mutex(State())
        self.isMember = isMember
        self.travelLimits = travelLimits
        keks = KeyEncryptionKeys(source: source, receivedDerivationsPerMinute: receivedDerivationsPerMinute)
    }

    /// The retry of records earlier imports left waiting, on a thread of its own (``retryWaitingRecords(release:)``).
    let waitingRetry = WaitingRecordRetry()

    // MARK: - Opening

    /// What the keyring takes from a store's configuration (the facade's `Store.Configuration`
    /// is the store's, so it hands down only these).
    struct Options: Sendable {
        /// The explicit key source; `nil`: the default key file, created lazily (not a member).
        var keySource: KeySource?
        var keyDerivationCost: KeyDerivationCost
        var travelKeyCost: KeyDerivationCost
        var maxReceivedKeyDerivationsPerMinute: Int
        /// A salvage: unwrap what opens and install the chain keys, check and make nothing.
        var salvage = false
    }

    /// Opens the keyring of a log's key records with the configured key source.
    ///
    /// With an explicit key source, a store without a data key gets one now,
    /// and an existing one must unwrap (else `.wrongKey`, before anything is
    /// written). Without one, the default key file is used and created lazily.
    /// - Parameter source: the key source already read (a copy of an open store, whose
    ///   configuration keeps no passphrase); else the configuration's.
    static func open(keyRecords: KeyRecords, configuration: Options, source given: Source? = nil) -> Result<Keyring, ChronicleError> {
        do {
            for cost in [configuration.keyDerivationCost, configuration.travelKeyCost] {
                if let problem = cost.problem { throw ChronicleError.invalidArgument(problem) }
            }
            let source = try given ?? configuration.keySource.map { try Source($0, cost: configuration.keyDerivationCost) }
                ?? KeyEncryptionKeys.defaultSource()
            let keyring = Keyring(
                keyRecords: keyRecords, source: source, isMember: configuration.keySource != nil,
                travelLimits: configuration.travelKeyCost.limits,
                receivedDerivationsPerMinute: max(1, configuration.maxReceivedKeyDerivationsPerMinute))
            if configuration.salvage {
                keyring.installChainKeysThatOpen()
            } else {
                try keyring.prepare(create: configuration.keySource != nil)
            }
            return .success(keyring)
        } catch {
            return .failure(ChronicleError.wrap(error))
        }
    }

    /// Unix ms from which every build keys the hash chain in the transaction that makes a store's
    /// first data key (2026-11-22T16:07:37Z, the first build with chain-key records): a key made
    /// since then never belongs to a store whose chain was keyed later (docs/FORMAT.md 4.2).
    static let chainKeyedAtKeyCreationSince: UInt64 = 1_795_363_657_000

    /// Checks that the active key unwraps (or creates the first key) and installs the chain key.
    private func prepare(create: Bool) throws {
        let (active, chainKeyID) = try keyRecords.activeAndChainKeyIDs()
        if let active {
            let key = try dataKey(active)
            if chainKeyID == nil {
                // A member's chain is keyed from its first key (by every build), so its meta lost
                // the entry: a log re-chained without the key must not be signed.
                if isMember {
                    throw ChronicleError.corruptMeta(
                        entry: "chain.key",
                        reason: "this store was made with a key source, so its chain is keyed from its first key, but meta names no chain "
                            + "key: the log was re-chained or meta edited without the key. Nothing was written")
                }
                // A store keyed by format 1 after its first events (every `Store.standard` with a
                // secret) never got a keyed chain: key it from here on (after verifying it). Only a
                // key made before builds keyed the chain when they make a key can be such a store's
                // (its creation time is authenticated by the key's wrap): a later one's log was
                // re-chained without the key.
                if let record = try keyRecords.wrappedKey(active), record.created >= Self.chainKeyedAtKeyCreationSince {
                    throw ChronicleError.corruptMeta(
                        entry: "chain.key",
                        reason: "this store's data key \(active) was made by a build that keys the chain when it makes a key, but "
                            + "meta names no chain key and the log holds no chain-key record: the log was re-chained without the key. "
                            + "Nothing was written")
                }
                try keyRecords.keyChain(with: active, dataKey: key)
            }
        } else if create {
            try refuseIfActiveKeyWasRemoved(chainKeyID: chainKeyID)
            if case let .passphrase(passphrase, limits) = sourceValue {
                // Argon2id runs here, never inside the write transaction that creates the key.
                let salt = Sodium.randomBytes(PasswordHash.saltBytes)
                _ = try keks.passphraseKEK(passphrase, salt: salt, limits: limits)
                state.withLock { $0.firstKeySalt = salt }
            }
            // The active key another process made first must open here too (else `.wrongKey` now).
            try keyRecords.ensureActiveKey(self)
        }
        let chain = try keyRecords.activeAndChainKeyIDs().chain
        if let chain, let key = try? dataKey(chain) {
            keyRecords.chainKeys.install(id: chain, from: key)
            // With the key at hand, the head is checked before anything trusts it: a cut or edited
            // head is refused at the opening, not at the first write.
            try keyRecords.checkHeadMAC()
        }
    }

    // MARK: - Keys

    /// The key that seals and authenticates new events (``EventSealer``): the active key,
    /// unwrapped once; with none active, a new key, whose record the log stores, activates and
    /// keys the chain with in the transaction that appends the event.
    func sealingKey(active: KeyID?, record: (KeyID) throws -> WrappedKey?) throws -> SealingKey {
        if let active { return SealingKey(id: active, key: try dataKey(active, record: record)) }
        let (id, key, created) = try newKey(reusing: nil)
        return SealingKey(id: id, key: key, created: created)
    }

    /// A new data key and its record, wrapped with this replica's KEK (not stored yet).
    /// - Parameter active: the active key's record, whose salt and cost a passphrase reuses (so
    ///   no new Argon2 run).
    func newKey(reusing active: WrappedKey?) throws -> (KeyID, SecureBytes, WrappedKey) {
        let id = KeyID.random()
        let key = try SecureBytes(randomCount: AEAD.keyBytes)
        let record = try wrapForStorage(key, id: id, active: active)
        state.withLock { $0.dataKeys[id] = key }
        return (id, key, record)
    }

    /// Wraps a data key with this replica's KEK (reusing the active key's salt, so no new Argon2 run).
    private func wrapForStorage(_ key: SecureBytes, id: KeyID, active: WrappedKey?) throws -> WrappedKey {
        var reuse: (salt: [UInt8], limits: PasswordHash.Limits)?
        if let active, active.kind == .passphrase {
            reuse = (active.salt, active.limits)
        } else if case let .passphrase(_, limits) = sourceValue, let salt = state.withLock({ $0.firstKeySalt }) {
            reuse = (salt, limits)  // derived in `prepare`, outside the transaction
        }
        let wrapping = try keks.wrappingKey(for: sourceValue, reusing: reuse)
        return try WrappedKey.wrap(
            key, id: id, kind: wrapping.kind, salt: wrapping.salt, limits: wrapping.limits,
            created: UnixMilliseconds.now(), kek: wrapping.kek)
    }

    /// The data key with `id`, unwrapping it from `meta` on first use.
    /// Whether the data key `id` is unwrapped already (using it needs no transaction and no Argon2id).
    func hasDataKey(_ id: KeyID) -> Bool { state.withLock { $0.dataKeys[id] != nil } }

    func dataKey(_ id: KeyID) throws -> SecureBytes {
        try dataKey(id) { try keyRecords.wrappedKey($0) }
    }

    /// The data key with `id`, unwrapping the record `record` reads on first use.
    func dataKey(_ id: KeyID, record read: (KeyID) throws -> WrappedKey?) throws -> SecureBytes {
        if let key = state.withLock({ $0.dataKeys[id] }) { return key }
        guard let record = try read(id) else {
            throw ChronicleError.keyUnavailable(reason: "data key \(id) is not on this replica (import the group's keys)")
        }
        let key = try unwrap(record)
        state.withLock { $0.dataKeys[id] = key }
        return key
    }

    /// Unwraps a data key with this store's KEK (``KeyEncryptionKeys/unwrap(_:cacheKEK:)``).
    func unwrap(_ record: WrappedKey, cacheKEK: Bool = true) throws -> SecureBytes {
        try keks.unwrap(record, cacheKEK: cacheKEK)
    }

    // MARK: - KEKs

    var sourceValue: Source { keks.source }

    /// Unwraps a record a peer sent (``KeyEncryptionKeys/unwrapReceived(_:source:)``).
    func unwrapReceived(_ record: WrappedKey, source: String) throws -> SecureBytes {
        try keks.unwrapReceived(record, source: source)
    }

    /// Whether unwrapping `record` needs an Argon2id run (``KeyEncryptionKeys/needsDerivation(_:)``).
    func needsDerivation(_ record: WrappedKey) -> Bool { keks.needsDerivation(record) }
}
