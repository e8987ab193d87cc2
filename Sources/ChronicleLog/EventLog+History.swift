import ChronicleFormat
import ChronicleLMDB

/// The history index: `latest` names each key's last record, and `previous` links every record to
/// the same key's record before it, so a key's history is a walk down its links.
///
/// A commit adds one `previous` row per record, always at the end (sequences only grow), and
/// rewrites one `latest` row per key. What it touches therefore depends on how many keys it
/// writes, not on how long their histories are. The index of builds before (`history`: one row
/// per record, keyed by name then sequence) made a commit of 1,000 keys rewrite every leaf of
/// that index, and the more so the longer the store had lived.
extension EventLog {
    /// Indexes the record at `sequence`, the newest in the log, as its key's latest.
    func indexHistory(_ event: Event, sequence: UInt64, _ txn: borrowing Transaction) throws {
        let name = HistoryKey.prefix(domain: event.domain, name: event.key)
        if let last = try txn.get(dbs.latest, key: name) {
            try txn.put(dbs.previous, key: sequence.bigEndianBytes, value: last, flags: .append)
        }
        try txn.put(dbs.latest, key: name, value: sequence.bigEndianBytes)
    }

    /// The sequences of a key's records, newest first.
    /// - Throws: `.corruptViewEntry` when a link does not lead to an earlier record (an edited
    ///   index is reported, never followed round a loop).
    func historySequences(_ domain: Domain, _ name: String, _ txn: borrowing Transaction) throws -> [UInt64] {
        guard let bytes = try txn.get(dbs.latest, key: HistoryKey.prefix(domain: domain, name: name)) else { return [] }
        guard var sequence = UInt64(bigEndianBytes: bytes), sequence > 0 else {
            throw ChronicleError.corruptViewEntry(key: name, reason: "its history index names a record of \(bytes.count) bytes")
        }
        var sequences = [sequence]
        while let link = try txn.get(dbs.previous, key: sequence.bigEndianBytes) {
            // Strictly down: the walk ends, whatever the rows say.
            guard let before = UInt64(bigEndianBytes: link), before > 0, before < sequence else {
                throw ChronicleError.corruptViewEntry(
                    key: name, reason: "its history index links record \(sequence) to \(link.count == 8 ? "record \(UInt64(bigEndianBytes: link) ?? 0)" : "\(link.count) bytes"), not to an earlier record")
            }
            sequences.append(before)
            sequence = before
        }
        return sequences
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

    /// Indexes, in the new layout, a store whose `history` rows say a build before this index
    /// wrote to it (all of it, or events after this build's last write): once, when it opens.
    /// Reads records without checking their chain (no key is at hand yet); `verify` checks that.
    func reindexHistoryIfAnEarlierBuildWrote() throws {
        guard try environment.read({ txn in try txn.count(dbs.legacyHistory) }) > 0 else { return }
        try environment.write { txn in
            guard try txn.count(dbs.legacyHistory) > 0 else { return }  // another process did it
            try clearHistory(txn)
            var last: [[UInt8]: UInt64] = [:]
            try txn.scan(dbs.events) { key, value in
                guard let sequence = UInt64(bigEndianBytes: key) else {
                    throw ChronicleError.corruptRecord(sequence: 0, reason: "log key of \(key.count) bytes")
                }
                let record = try LogRecord(decoding: value, sequence: sequence)
                guard record.kind == .event else { return true }
                let event = try record.event(sequence: sequence)
                if let before = last.updateValue(sequence, forKey: HistoryKey.prefix(domain: event.domain, name: event.key)) {
                    try txn.put(dbs.previous, key: sequence.bigEndianBytes, value: before.bigEndianBytes, flags: .append)
                }
                return true
            }
            try writeLatest(last.map { ($0.key, $0.value) }, txn)
        }
    }
}
