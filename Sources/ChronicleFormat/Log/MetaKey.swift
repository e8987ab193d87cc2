import ChronicleSodium

/// Names of the entries in the `meta` database.
package enum MetaKey {
    package static let format = Array("format".utf8)
    package static let replica = Array("replica".utf8)
    package static let epoch = Array("epoch".utf8)
    package static let home = Array("home".utf8)
    package static let sequence = Array("seq".utf8)
    package static let counter = Array("counter".utf8)
    package static let hlc = Array("hlc".utf8)
    package static let chain = Array("chain".utf8)
    /// The id of the data key whose chain subkey keys the hash chain (absent: unkeyed chain).
    package static let chainKey = Array("chain.key".utf8)
    /// Present (1) when the log itself holds the record that keys its chain (format 2); absent in
    /// a store keyed by format 1, whose chain is keyed from its first record.
    package static let chainInLog = Array("chain.inlog".utf8)
    /// BLAKE2b-256, keyed with the chain key, of the head: sequence, chain hash, epoch, chain key id.
    package static let headMAC = Array("head.mac".utf8)
    /// The epoch the head MAC was made over when a copy of the store renewed its epoch; gone
    /// with the next MAC, which covers the new one.
    package static let macEpoch = Array("head.mac.epoch".utf8)
    /// The id of the data key that seals new events.
    package static let activeKey = Array("dk.active".utf8)
    /// Wrapped data keys: `dk/` ‖ key id.
    package static let wrappedKeyPrefix = Array("dk/".utf8)
    package static func wrappedKey(_ id: KeyID) -> [UInt8] { wrappedKeyPrefix + id.bytes }
    /// Travel wraps of this replica's passphrase-wrapped data keys (at least MODERATE cost): `dk.travel/` ‖ key id.
    package static let travelKeyPrefix = Array("dk.travel/".utf8)
    package static func travelKey(_ id: KeyID) -> [UInt8] { travelKeyPrefix + id.bytes }
    /// Other records received under a key id this store already holds a record for (a store that
    /// cannot open them keeps up to ``EventLog/alternatesPerKey``, to relay: a carrier's record must
    /// not censor the real one): `dk.alt/` ‖ key id ‖ u64 arrival (Unix ms) ‖ first 8 bytes of
    /// BLAKE2b-256 of the record. Stores before the arrival field wrote `dk.alt/` ‖ key id ‖ hash.
    package static let alternateKeyPrefix = Array("dk.alt/".utf8)
    package static func alternateKey(_ id: KeyID, _ record: [UInt8], arrival: UInt64) -> [UInt8] {
        alternateKeyPrefix + id.bytes + arrival.bigEndianBytes + Array(GenericHash.hash(record).prefix(8))
    }
    /// How many relay-only records each source brought: `relay.src/` ‖ first 16 bytes of
    /// BLAKE2b-256 of the source's UTF-8 name → u64 count ‖ u64 bytes ‖ the name (UTF-8).
    package static let relaySourcePrefix = Array("relay.src/".utf8)
    package static func relaySource(_ source: String) -> [UInt8] {
        relaySourcePrefix + Array(GenericHash.hash(Array(source.utf8)).prefix(16))
    }
    /// Received key records a member derived a key for and could not open, so that no process
    /// of it derives them again: `dk.unopened/` ‖ [16] tag → u64 Unix ms it was tried. The tag is
    /// keyed BLAKE2b of the record under a subkey of the KEK of the member's active key record
    /// (docs/FORMAT.md 7.2): a new passphrase tries every record again.
    package static let unopenedKeyPrefix = Array("dk.unopened/".utf8)
    package static func unopenedKey(_ tag: [UInt8]) -> [UInt8] { unopenedKeyPrefix + tag }
    /// Every writer id this store has used, with the Unix ms it was drawn: `writer/` ‖ id.
    package static func writer(_ id: ReplicaID) -> [UInt8] { Array("writer/".utf8) + id.bytes }
    /// The retention of keys that declare none, as the store was last opened with: u32, 0 for all.
    package static let defaultRetention = Array("retention.default".utf8)
    /// 16 random bytes, replaced in every transaction that changes a `retention` row: a writer
    /// that remembers rows reads it once a transaction and forgets them when it changed.
    package static let retentionRules = Array("retention.rules".utf8)

}
