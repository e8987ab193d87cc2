import ChronicleFormat
import ChronicleLMDB
import ChronicleSodium

/// Gap records: runs of records retention dropped, each standing for its run in the chain with a MAC only the chain key makes.
///
/// Dropping records in place: each run of dropped records becomes one gap record under the run's
/// last sequence (docs/FORMAT.md 4.5), so kept records keep their sequences and chain hashes, and
/// a reader's or a peer's place in the log stays valid.
package struct Gaps: Sendable {
    /// What it needs of the log: its storage, and the chain keys that MAC the gaps.
    let storage: LogStorage
    let chainKeys: ChainKeys

    private var environment: Environment { storage.environment }
    private var dbs: Databases { storage.dbs }
}

extension EventLog {
    package var gaps: Gaps { Gaps(storage: storage, chainKeys: chainKeys) }
}

extension Gaps {
    /// The store format that gap records need (readers of format 1 do not know them).
    static let formatWithGaps: UInt32 = 2

    /// Drops the records of `plan`: gap records in the log, their `dots` rows, and the history
    /// links of the key's kept records joined across them; adds their identities to
    /// `identities`, which the caller records (``recordDropped(_:_:)``) once for the whole
    /// transaction. Views do not change.
    func drop(_ plan: RetentionPlanner.KeyDrops, _ txn: borrowing Transaction, _ head: inout LogHead, identities: inout [ReplicaID: [UInt64]]) throws {
        let macKey = try head.chainKey(chainKeys)
        try markFormatWithGaps(txn)
        for (sequence, event) in plan.dropped {
            _ = try txn.delete(dbs.dots, key: event.dot)
            identities[event.origin, default: []].append(event.counter)
            _ = try txn.delete(dbs.previous, key: sequence.bigEndianBytes)
            try replaceWithGap(sequence, macKey: macKey, txn)
        }
        // Each kept record links to the next kept one below it.
        let dropped = Set(plan.dropped.map(\.sequence))
        var keptBelow: UInt64?
        for position in plan.sequences.indices.reversed() {  // oldest first
            let sequence = plan.sequences[position]
            if dropped.contains(sequence) { continue }
            let linked = position + 1 < plan.sequences.count ? plan.sequences[position + 1] : nil
            if linked != keptBelow {
                if let keptBelow {
                    try txn.put(dbs.previous, key: sequence.bigEndianBytes, value: keptBelow.bigEndianBytes)
                } else {
                    _ = try txn.delete(dbs.previous, key: sequence.bigEndianBytes)
                }
            }
            keptBelow = sequence
        }
    }

    /// Records the identities of dropped events as compacted ranges, one origin at a time.
    func recordDropped(_ identities: [ReplicaID: [UInt64]], _ txn: borrowing Transaction) throws {
        for (origin, counters) in identities {
            try CompactedIdentities.add(origin: origin, counters: Array(Set(counters)).sorted(), txn, dbs)
        }
    }

    /// Replaces the record at `sequence` with a gap, joined with a gap right before or after it.
    private func replaceWithGap(_ sequence: UInt64, macKey: KeyedHash?, _ txn: borrowing Transaction) throws {
        guard let bytes = try txn.get(dbs.events, key: sequence.bigEndianBytes) else {
            throw ChronicleError.corruptRecord(sequence: sequence, reason: "missing from the log")
        }
        let record = try LogRecord(decoding: bytes, sequence: sequence)
        var first = sequence
        var chainBefore = LogRecord.noChain
        if sequence > 1 {
            // Sequences are dense: the record before is at `sequence − 1`, or a gap ends there.
            guard let bytes = try txn.get(dbs.events, key: (sequence - 1).bigEndianBytes) else {
                throw ChronicleError.corruptRecord(sequence: sequence - 1, reason: "missing from the log")
            }
            let before = try LogRecord(decoding: bytes, sequence: sequence - 1)
            if before.kind == .gap {
                let gap = try Self.gap(before, at: sequence - 1)
                try Self.checkMAC(gap, last: sequence - 1, chainAtLast: before.hash, key: macKey)
                first = gap.first
                chainBefore = gap.chainBefore
                _ = try txn.delete(dbs.events, key: (sequence - 1).bigEndianBytes)
            } else {
                chainBefore = before.hash
            }
        }
        var last = sequence
        var chainAtLast = record.hash
        var after: (sequence: UInt64, record: LogRecord)?
        try txn.scan(dbs.events, from: (sequence + 1).bigEndianBytes) { key, value in
            if let next = UInt64(bigEndianBytes: key) { after = (next, try LogRecord(decoding: value, sequence: next)) }
            return false
        }
        if let after, after.record.kind == .gap, case let gap = try Self.gap(after.record, at: after.sequence), gap.first == sequence + 1 {
            try Self.checkMAC(gap, last: after.sequence, chainAtLast: after.record.hash, key: macKey)
            last = after.sequence
            chainAtLast = after.record.hash
            _ = try txn.delete(dbs.events, key: sequence.bigEndianBytes)
        }
        let gap = Gap(
            first: first, chainBefore: chainBefore,
            mac: Gap.mac(key: macKey, first: first, last: last, chainBefore: chainBefore, chainAtLast: chainAtLast))
        try txn.put(dbs.events, key: last.bigEndianBytes, value: LogRecord(kind: .gap, body: gap.encoded(), hash: chainAtLast).encoded())
    }

    /// Checks a gap's MAC before a drop joins it: a joined gap gets a new MAC under the key, so a
    /// gap forged without the key must be refused here, not signed (nothing of the drop is written).
    private static func checkMAC(_ gap: Gap, last: UInt64, chainAtLast: [UInt8], key: KeyedHash?) throws {
        guard gap.macVerifies(key: key, last: last, chainAtLast: chainAtLast) else {
            throw ChronicleError.corruptRecord(
                sequence: last, reason: "a gap whose MAC does not verify (records were removed or a gap edited without the key); nothing was dropped")
        }
    }

    static func gap(_ record: LogRecord, at sequence: UInt64) throws -> Gap {
        do { return try Gap(decoding: record.body) } catch {
            throw ChronicleError.corruptRecord(sequence: sequence, reason: "gap: \(error)")
        }
    }

    /// Raises the store's format to the one with gaps (a reader of format 1 then refuses the store
    /// with `incompatibleFormat` rather than misread it).
    private func markFormatWithGaps(_ txn: borrowing Transaction) throws {
        let format = try txn.get(dbs.meta, key: MetaKey.format).flatMap { UInt32(bigEndianBytes: $0) } ?? 0
        if format < Self.formatWithGaps { try txn.put(dbs.meta, key: MetaKey.format, value: Self.formatWithGaps.bigEndianBytes) }
    }

    /// Makes every gap's MAC again with `key`: the chain became keyed, and a gap made before
    /// must verify under the key from now on.
    func remacGaps(with key: KeyedHash?, _ txn: borrowing Transaction) throws {
        var gaps: [(sequence: UInt64, record: LogRecord, gap: Gap)] = []
        try txn.scan(dbs.events) { keyBytes, value in
            guard value.first == RecordKind.gap.rawValue, let sequence = UInt64(bigEndianBytes: keyBytes) else { return true }
            let record = try LogRecord(decoding: value, sequence: sequence)
            gaps.append((sequence, record, try Self.gap(record, at: sequence)))
            return true
        }
        for var item in gaps {
            item.gap.mac = Gap.mac(key: key, first: item.gap.first, last: item.sequence, chainBefore: item.gap.chainBefore, chainAtLast: item.record.hash)
            item.record.body = item.gap.encoded()
            try txn.put(dbs.events, key: item.sequence.bigEndianBytes, value: item.record.encoded())
        }
    }

    /// Whether `sequence` lies inside a gap (not at its last sequence, whose chain hash the gap keeps).
    func isInsideGap(_ sequence: UInt64, _ txn: borrowing Transaction) throws -> Bool {
        var inside = false
        try txn.scan(dbs.events, from: sequence.bigEndianBytes) { key, value in
            guard let last = UInt64(bigEndianBytes: key), last > sequence, value.first == RecordKind.gap.rawValue else { return false }
            inside = try Self.gap(try LogRecord(decoding: value, sequence: last), at: last).first <= sequence
            return false
        }
        return inside
    }

    /// Whether the log at `sequence` is where a checkpoint with chain hash `chain` left it: the
    /// record there has that hash, or retention dropped it (a gap covers it, and the checkpoint is
    /// confirmed by the log's epoch, which the caller compares).
    /// - Parameter insideGapMatches: whether a sequence inside a gap counts as a match (for a
    ///   checkpoint, restored with the store, it does; for a mark another replica keeps of this
    ///   log, which may predate a restore of this store, it does not: nothing can be compared there).
    package func chainMatches(at sequence: UInt64, _ chain: [UInt8], insideGapMatches: Bool = true) throws -> Bool {
        try environment.read { txn in try chainMatches(at: sequence, chain, txn, insideGapMatches: insideGapMatches) }
    }

    func chainMatches(at sequence: UInt64, _ chain: [UInt8], _ txn: borrowing Transaction, insideGapMatches: Bool = true) throws -> Bool {
        guard sequence > 0 else { return true }
        if let bytes = try txn.get(dbs.events, key: sequence.bigEndianBytes) {
            return try LogRecord(decoding: bytes, sequence: sequence).hash == chain
        }
        return insideGapMatches ? try isInsideGap(sequence, txn) : false
    }
}
