import ChronicleFormat
import ChronicleLMDB
import Synchronization

/// The history index: each key's latest record (`latest`) and, per record, the key's record before it (`previous`), so a key's history is read without scanning the log.
///
/// The history index: `latest` names each key's last record, and `previous` links every record to
/// the same key's record before it, so a key's history is a walk down its links.
///
/// A commit adds one `previous` row per record, always at the end (sequences only grow), and
/// rewrites one `latest` row per key. What it touches therefore depends on how many keys it
/// writes, not on how long their histories are. The index of builds before (`history`: one row
/// per record, keyed by name then sequence) made a commit of 1,000 keys rewrite every leaf of
/// that index, and the more so the longer the store had lived.
///
/// The links are only as good as the last writer: a build before this index (still sharing the
/// store, or run on it since) writes `history` rows instead, and may renumber the log under them
/// by compacting. So every write transaction first checks that the index can be extended (no
/// `history` rows, no `previous` row past the log's head) and rebuilds it from the log when not,
/// and a read that finds `history` rows reads the log instead of the links.
package struct HistoryIndex: Sendable {
    /// What it reads and writes: the history databases of the log's environment, nothing else of the log.
    let storage: LogStorage

    private var environment: Environment { storage.environment }
    private var dbs: Databases { storage.dbs }
}

extension EventLog {
    package var historyIndex: HistoryIndex { HistoryIndex(storage: storage) }
}

extension HistoryIndex {
    /// Indexes records appended to the log in this transaction, in the order of their sequences
    /// (each the newest of its key so far), as their keys' latest, and notes their keys in
    /// `head` for the sweep's schedule.
    /// - Parameter records: each record's history prefix (``HistoryKey``) and sequence.
    func indexHistory<Records: Sequence<([UInt8], UInt64)>>(_ records: Records, _ txn: borrowing Transaction, _ head: inout LogHead) throws {
        var rebuilt = false
        for (name, sequence) in records {
            if head.appendedHistory.count < SweepSchedule.maxDirtyKeys {
                head.appendedHistory.append(name)
            } else {
                head.appendedBeyondList += 1  // bounded memory: the next pass looks at every key
            }
            if rebuilt { continue }  // the rebuild indexed every record the log holds
            var before: UInt64?
            var malformed = false
            try txn.withValue(dbs.latest, key: name) { last in
                before = last.count == 8 ? UInt64(bigEndian: last.loadUnaligned(as: UInt64.self)) : nil
                malformed = before.map { $0 == 0 || $0 >= sequence } ?? true
            }
            if malformed {
                // An edited row: rebuild from the log, which holds these records already.
                try rebuildHistory(txn)
                rebuilt = true
                continue
            }
            if let before { try txn.put(dbs.previous, key: .bigEndian(sequence), value: .bigEndian(before), flags: .append) }
            try txn.put(dbs.latest, key: .array(name), value: .bigEndian(sequence))
        }
    }

    /// Rebuilds the index in this write transaction when it cannot be extended: a build before
    /// it wrote to the store (its `history` rows), or `previous` holds a row past the log's head
    /// (the log was renumbered under it, or the file edited). Two lookups when it is sound.
    func repairHistoryIfStale(_ txn: borrowing Transaction, head: LogHead) throws {
        if try txn.count(dbs.legacyHistory) == 0 {
            guard let last = try txn.last(dbs.previous) else { return }
            if let sequence = UInt64(bigEndianBytes: last.key), sequence <= head.sequence { return }
        }
        try rebuildHistory(txn)
    }

    /// The sequences of a key's records, newest first.
    /// - Throws: `.corruptViewEntry` when a link does not lead to an earlier record (an edited
    ///   index is reported, never followed round a loop).
    func historySequences(_ domain: Domain, _ name: String, _ txn: borrowing Transaction) throws -> [UInt64] {
        if try txn.count(dbs.legacyHistory) > 0 {
            // A build before this index wrote since: the links miss its events until the next write.
            return try sequencesFromTheLog(domain, name, txn).reversed()
        }
        var sequences: [UInt64] = []
        try walk(HistoryKey.prefix(domain: domain, name: name), txn) { sequence in
            sequences.append(sequence)
            return true
        }
        return sequences
    }

    /// How many records a key holds, counted down its links from `latest` in place, and its
    /// latest record; `nil` when it has none. The walk stops early at `known` (a count taken
    /// before, at the key's then latest record: what lies below it was counted then, and only the
    /// records appended since are walked) and once the count is past `limit` (it is then
    /// `limit + 1`: over its retention, which is all the caller asks).
    ///
    /// A count from `known` is exact while nothing was dropped below it since, and never less than
    /// the true count otherwise (records join a history only at its top). Records are never
    /// renumbered within an epoch: the caller keeps counts per epoch.
    /// - Parameter walked: counts the links read (the work a pass does, for tests and benchmarks).
    func revisionCount(
        _ prefix: [UInt8], _ txn: borrowing Transaction, known: RevisionCount?, limit: Int, walked: borrowing Atomic<Int>
    ) throws -> RevisionCount? {
        var latest: UInt64?
        var count = 0
        var fromKnown = 0
        let links = try walk(prefix, txn) { sequence in
            if latest == nil { latest = sequence }
            if let known, sequence == known.latest {
                fromKnown = known.count  // it and the records below it, counted before
                return false
            }
            count += 1
            return count <= limit
        }
        walked.add(links, ordering: .relaxed)
        return latest.map { RevisionCount(latest: $0, count: count + fromKnown) }
    }

    /// Visits a key's records from its latest down its links, each link read in place into one
    /// key buffer (a key past its retention is walked at every drop: no allocation per link),
    /// until `visit` returns `false` or the links end.
    /// - Parameter prefix: the key's history prefix (``HistoryKey``).
    /// - Returns: the links read.
    /// - Throws: `.corruptViewEntry` when `latest` is malformed or a link does not lead down.
    @discardableResult
    private func walk(_ prefix: [UInt8], _ txn: borrowing Transaction, _ visit: (UInt64) throws -> Bool) throws -> Int {
        guard let bytes = try txn.get(dbs.latest, key: prefix) else { return 0 }
        guard var sequence = UInt64(bigEndianBytes: bytes), sequence > 0 else {
            throw ChronicleError.corruptViewEntry(key: Self.name(ofPrefix: prefix), reason: "its history index names a record of \(bytes.count) bytes")
        }
        var key = [UInt8](repeating: 0, count: 8)
        var links = 0
        while try visit(sequence) {
            key.withUnsafeMutableBytes { $0.storeBytes(of: sequence.bigEndian, as: UInt64.self) }
            var link: (before: UInt64?, size: Int) = (nil, 0)
            links += 1
            let found = try txn.withValue(dbs.previous, key: key) { bytes in
                link = (bytes.count == 8 ? UInt64(bigEndian: bytes.loadUnaligned(as: UInt64.self)) : nil, bytes.count)
            }
            guard found else { break }
            // Strictly down: the walk ends, whatever the rows say.
            guard let before = link.before, before > 0, before < sequence else { throw Self.badLink(Self.name(ofPrefix: prefix), from: sequence, link) }
            sequence = before
        }
        return links
    }

    /// A link that does not lead down: an edited index, reported, never followed round a loop.
    private static func badLink(_ name: String, from sequence: UInt64, _ link: (before: UInt64?, size: Int)) -> ChronicleError {
        .corruptViewEntry(
            key: name,
            reason: "its history index links record \(sequence) to \(link.size == 8 ? "record \(link.before ?? 0)" : "\(link.size) bytes"), not to an earlier record")
    }

    private static func name(ofPrefix prefix: [UInt8]) -> String { String(decoding: prefix.dropFirst(2), as: UTF8.self) }

    /// A key's records found by reading the whole log, oldest first.
    private func sequencesFromTheLog(_ domain: Domain, _ name: String, _ txn: borrowing Transaction) throws -> [UInt64] {
        var sequences: [UInt64] = []
        let wanted = Array(name.utf8)
        try eventsOfTheLog(txn) { sequence, event in
            if event.domain == domain, event.key.utf8.elementsEqual(wanted) { sequences.append(sequence) }
        }
        return sequences
    }

    /// Calls `visit` with every event record of the log that decodes, in sequence order, without
    /// checking the chain (no key may be at hand); `verify` reports the records that do not.
    func eventsOfTheLog(_ txn: borrowing Transaction, _ visit: (UInt64, Event) throws -> Void) throws {
        try txn.scan(dbs.events) { key, value in
            guard let sequence = UInt64(bigEndianBytes: key), let record = try? LogRecord(decoding: value, sequence: sequence),
                record.kind == .event, let event = try? record.event(sequence: sequence)
            else { return true }
            try visit(sequence, event)
            return true
        }
    }

    /// Empties `latest` and `previous`, and the index of builds before, for a rebuild.
    func clearHistory(_ txn: borrowing Transaction) throws {
        for database in [dbs.latest, dbs.previous, dbs.legacyHistory] { try txn.clear(database) }
    }

    /// Writes the `latest` rows of a rebuild (after its `previous` rows), in key order.
    func writeLatest(_ heads: [(key: [UInt8], sequence: UInt64)], _ txn: borrowing Transaction) throws {
        for head in heads.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            try txn.put(dbs.latest, key: head.key, value: head.sequence.bigEndianBytes, flags: .append)
        }
    }

    /// Rebuilds `latest` and `previous` from the log and empties `history`, in `txn`.
    func rebuildHistory(_ txn: borrowing Transaction) throws {
        try clearHistory(txn)
        var last: [[UInt8]: UInt64] = [:]
        try eventsOfTheLog(txn) { sequence, event in
            if let before = last.updateValue(sequence, forKey: HistoryKey.prefix(domain: event.domain, name: event.key)) {
                try txn.put(dbs.previous, key: sequence.bigEndianBytes, value: before.bigEndianBytes, flags: .append)
            }
        }
        try writeLatest(last.map { ($0.key, $0.value) }, txn)
    }

    /// Indexes a store that a build before this index wrote to (all of it, or events after this
    /// build's last write), when it opens, so its first reads need no log scan.
    func reindexHistoryIfAnEarlierBuildWrote() throws {
        guard try environment.read({ txn in try txn.count(dbs.legacyHistory) }) > 0 else { return }
        try environment.write { txn in
            guard try txn.count(dbs.legacyHistory) > 0 else { return }  // another process did it
            try rebuildHistory(txn)
        }
    }
}
