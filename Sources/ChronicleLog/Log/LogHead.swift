package import ChronicleFormat
package import ChronicleLMDB
package import ChronicleSodium

/// The tip of the local log, read from `meta` inside every write transaction
/// (two processes may share the store, so it is never cached across transactions).
package struct LogHead: Sendable {
    /// The last local sequence number.
    package var sequence: UInt64
    /// The last counter used by this replica's own events.
    package var counter: UInt64
    /// The last HLC reading.
    package var hlc: HLC
    /// The chain hash of the last record.
    package var chain: [UInt8]
    /// The data key whose subkey keys the chain, or `nil` for an unkeyed chain.
    package var chainKeyID: KeyID? {
        didSet { resolvedChainKey = nil }
    }
    /// The chain key, looked up once per transaction rather than once per record.
    private var resolvedChainKey: KeyedHash?
    /// The history prefixes (``HistoryKey``) of the records this transaction appended, one a
    /// record, at most ``SweepSchedule/maxDirtyKeys`` (the rest are counted in
    /// `appendedBeyondList`): the sweep's schedule hears of them once, when the transaction is done.
    var appendedHistory: [[UInt8]] = []
    /// Records appended past the list's cap (a compaction's rewrite, a large import): their
    /// keys are not listed, and the next pass looks at every key.
    var appendedBeyondList = 0
    /// The `retention` rows this transaction took from the log (at its first change that declares
    /// a rule), put back when its body is done.
    var retentionRules: RetentionRules?

    /// The key of this head's chain (`nil`: unkeyed), from `keys`.
    package mutating func chainKey(_ keys: ChainKeys) throws -> KeyedHash? {
        guard chainKeyID != nil else { return nil }
        if let resolvedChainKey { return resolvedChainKey }
        resolvedChainKey = try keys.key(chainKeyID)
        return resolvedChainKey
    }

    /// Whether `other` is at the same place: same sequence, clock, chain hash and chain key.
    package func sameTip(as other: LogHead) -> Bool {
        sequence == other.sequence && hlc == other.hlc && chain == other.chain && chainKeyID == other.chainKeyID
    }

    /// Whether `other` holds the same records: same sequence, chain hash and chain key.
    package func sameRecords(as other: LogHead) -> Bool {
        sequence == other.sequence && chain == other.chain && chainKeyID == other.chainKeyID
    }

    package static let empty = LogHead(sequence: 0, counter: 0, hlc: HLC(rawValue: 0), chain: LogRecord.noChain, chainKeyID: nil)

    package static func read(_ txn: borrowing Transaction, _ dbs: Databases) throws -> LogHead {
        func u64(_ key: [UInt8]) throws -> UInt64 {
            guard let bytes = try txn.get(dbs.meta, key: key) else { return 0 }
            guard let value = UInt64(bigEndianBytes: bytes) else {
                throw ChronicleError.corruptMeta(entry: String(decoding: key, as: UTF8.self), reason: "\(bytes.count) bytes, not 8")
            }
            return value
        }
        let chain = try txn.get(dbs.meta, key: MetaKey.chain) ?? LogHead.empty.chain
        let chainKeyID = try txn.get(dbs.meta, key: MetaKey.chainKey).map { try KeyID(metaEntry: "chain key", $0) }
        return LogHead(
            sequence: try u64(MetaKey.sequence), counter: try u64(MetaKey.counter), hlc: HLC(rawValue: try u64(MetaKey.hlc)),
            chain: chain, chainKeyID: chainKeyID)
    }

    /// Writes the head; with the chain key, also its MAC (so `meta` cannot be edited to cut
    /// the log's tail or swap its head without the key).
    package func write(_ txn: borrowing Transaction, _ dbs: Databases, chainKey: KeyedHash?) throws {
        try txn.put(dbs.meta, key: MetaKey.sequence, value: sequence.bigEndianBytes)
        try txn.put(dbs.meta, key: MetaKey.counter, value: counter.bigEndianBytes)
        try txn.put(dbs.meta, key: MetaKey.hlc, value: hlc.rawValue.bigEndianBytes)
        try txn.put(dbs.meta, key: MetaKey.chain, value: chain)
        if let chainKey {
            try txn.put(dbs.meta, key: MetaKey.headMAC, value: try mac(txn, dbs, key: chainKey))
            _ = try txn.delete(dbs.meta, key: MetaKey.macEpoch)  // the MAC now covers the current epoch
        }
    }

    /// BLAKE2b-256(key: chain key, "chronicle.head.v1" ‖ sequence ‖ chain hash ‖ epoch ‖ chain key id).
    package func mac(_ txn: borrowing Transaction, _ dbs: Databases, key: KeyedHash) throws -> [UInt8] {
        mac(epoch: try txn.get(dbs.meta, key: MetaKey.epoch) ?? LogEpoch.zero.bytes, key: key)
    }

    /// The MAC over `epoch` (a copy's head MAC covers the epoch before the copy, `head.mac.epoch`).
    package func mac(epoch: [UInt8], key: KeyedHash) -> [UInt8] {
        key.hash([Array("chronicle.head.v1".utf8), sequence.bigEndianBytes, chain, epoch, chainKeyID?.bytes ?? []])
    }

    /// Checks a keyed head's MAC (nothing for an unkeyed head): `verify` runs it, and so does
    /// every write before it writes a new MAC, so an edited head is refused, never re-signed.
    /// - Throws: `.corruptMeta("head.mac", …)` when the MAC is missing or does not verify;
    ///   `.keyUnavailable` when the chain key is not at hand.
    package func checkMAC(_ txn: borrowing Transaction, _ dbs: Databases, keys: ChainKeys) throws {
        guard let key = try keys.key(chainKeyID) else { return }
        guard let stored = try txn.get(dbs.meta, key: MetaKey.headMAC) else {
            // Stores keyed by format 1 get their head MAC with their next write.
            if try txn.get(dbs.meta, key: MetaKey.chainInLog) == nil { return }
            throw ChronicleError.corruptMeta(entry: "head.mac", reason: "the head of a keyed log has no MAC")
        }
        if Sodium.constantTimeEqual(stored, try mac(txn, dbs, key: key)) { return }
        // A copy that has not written yet: its MAC covers the epoch before the copy.
        if let covered = try txn.get(dbs.meta, key: MetaKey.macEpoch), Sodium.constantTimeEqual(stored, mac(epoch: covered, key: key)) {
            return
        }
        throw ChronicleError.corruptMeta(entry: "head.mac", reason: "the head's MAC does not verify: meta was edited")
    }
}
