package import ChronicleFormat
package import ChronicleLMDB
import Foundation

/// Reading the log as the tools and the change stream show it: view entries, events with their chain hashes, the catalog of keys, statistics.
///
/// Read-only questions the tools and maintenance code ask of the log, one snapshot each.
/// It reads only, in read transactions of its own: the storage and the read-side parts over it.
package struct Inspection: Sendable {
    let storage: LogStorage
    /// This replica's id (the statistics name it).
    let replica: ReplicaID
    let driftGuard: DriftGuard
    let replayer: LogReplay
    let gaps: Gaps
    let planner: RetentionPlanner

    private var environment: Environment { storage.environment }
    private var dbs: Databases { storage.dbs }
    private var path: String { storage.path }
    private var tables: KeyTables { KeyTables(storage: storage) }
    private var historyIndex: HistoryIndex { HistoryIndex(storage: storage) }
    private var relayOnly: RelayOnlyBounds { RelayOnlyBounds(storage: storage) }
}

extension EventLog {
    package var inspection: Inspection {
        Inspection(storage: storage, replica: replica, driftGuard: driftGuard, replayer: replayer, gaps: gaps, planner: retentionPlanner)
    }
}

extension Inspection {
    /// Every current entry of a view, in key order.
    package func viewEntries(_ domain: Domain) throws -> [(name: String, entry: ViewEntry)] {
        try environment.read { txn in try viewEntries(domain, txn) }
    }

    package func viewEntries(_ domain: Domain, _ txn: borrowing Transaction) throws -> [(name: String, entry: ViewEntry)] {
        var entries: [(name: String, entry: ViewEntry)] = []
        try txn.scan(dbs.view(domain)) { key, value in
            let name = String(decoding: key, as: UTF8.self)
            entries.append((name, try ViewEntry.decoding(value, key: name)))
            return true
        }
        return entries
    }

    /// The log's events with sequence in `range`, oldest first, checking the hash chain from the start.
    package func events(in range: ClosedRange<UInt64>) throws -> [CommittedEvent] {
        try environment.read { txn in
            var events: [CommittedEvent] = []
            _ = try replayer.replayLog(txn, upTo: range.upperBound) { sequence, event in
                if range.contains(sequence) {
                    let hash = try txn.get(dbs.events, key: sequence.bigEndianBytes).map { try LogRecord(decoding: $0, sequence: sequence).hash } ?? []
                    events.append(try streamed(event, sequence, hash: hash, txn))
                }
            }
            return events
        }
    }

    /// An event as the change stream and the tools show it: whether it is current or held back, and its chain hash.
    private func streamed(_ event: Event, _ sequence: UInt64, hash: [UInt8], _ txn: borrowing Transaction) throws -> CommittedEvent {
        var committed = CommittedEvent(sequence: sequence, event: event, isWinner: try isCurrent(event, sequence, txn))
        // Only an event that is not current can be held back (one lookup less for nearly every event).
        committed.isHeldBack = try !committed.isWinner
            && driftGuard.holds(event.hlc, sequence: sequence, txn)
        committed.chainHash = hash
        return committed
    }

    /// Of the events at `sequences` that the drift guard held back when they were read, those it
    /// has let into their views since (one snapshot), with whether each is current now; the chain
    /// hash of the record at `position` (empty for 0 or none); and the log's epoch in that snapshot.
    package func releasedEvents(_ sequences: [UInt64], position: UInt64) throws -> (events: [CommittedEvent], position: [UInt8], epoch: LogEpoch) {
        try environment.read { txn in
            let hash = try txn.get(dbs.events, key: position.bigEndianBytes).map { try LogRecord(decoding: $0, sequence: position).hash } ?? []
            var released: [CommittedEvent] = []
            for sequence in sequences {
                guard let bytes = try txn.get(dbs.events, key: sequence.bigEndianBytes) else { continue }
                let record = try LogRecord(decoding: bytes, sequence: sequence)
                guard record.kind == .event else { continue }
                let event = try streamed(try record.event(sequence: sequence), sequence, hash: record.hash, txn)
                if !event.isHeldBack { released.append(event) }
            }
            return (released, hash, try EventLog.epoch(txn, dbs))
        }
    }

    /// Whether the log record at `sequence` has the chain hash `hash` (a checkpoint still names
    /// the same point of the same log), and the log's epoch.
    package func recordMatches(sequence: UInt64, hash: [UInt8]) throws -> (matches: Bool, epoch: LogEpoch) {
        try environment.read { txn in
            let epoch = try EventLog.epoch(txn, dbs)
            guard sequence > 0 else { return (true, epoch) }
            // A place inside a gap: retention dropped the record there, and the epoch confirms it.
            guard let bytes = try txn.get(dbs.events, key: sequence.bigEndianBytes) else { return (try gaps.isInsideGap(sequence, txn), epoch) }
            return (try LogRecord(decoding: bytes, sequence: sequence).hash == hash, epoch)
        }
    }

    /// Up to `limit` events after sequence `after`, oldest first, and the last sequence looked
    /// at (records that are no events, such as anchors and opaque events, are passed over).
    /// One snapshot; the chain is `verify`'s to check.
    /// Also the log's epoch in that snapshot: a compaction renumbers the log and draws a new one.
    package func events(after: UInt64, limit: Int) throws -> (events: [CommittedEvent], through: UInt64, epoch: LogEpoch) {
        return try environment.read { txn in
            let epoch = try EventLog.epoch(txn, dbs)
            guard after < UInt64.max else { return ([], after, epoch) }
            var events: [CommittedEvent] = []
            var through = after
            try txn.scanInPlace(dbs.events, from: (after + 1).bigEndianBytes) { key, value in
                guard let sequence = UInt64(bigEndianBytes: Array(key)) else {
                    throw ChronicleError.corruptRecord(sequence: through, reason: "a log key of \(key.count) bytes")
                }
                let record = try LogRecord(decoding: Array(value), sequence: sequence)
                if record.kind == .event {
                    events.append(try streamed(try record.event(sequence: sequence), sequence, hash: record.hash, txn))
                }
                through = sequence
                return events.count < limit
            }
            return (events, through, epoch)
        }
    }

    /// Whether the event at `sequence` is its key's current entry in the view.
    private func isCurrent(_ event: Event, _ sequence: UInt64, _ txn: borrowing Transaction) throws -> Bool {
        guard let bytes = try txn.get(dbs.view(event.domain), key: Array(event.key.utf8)) else { return false }
        return try ViewEntry.decoding(bytes, key: event.key).sequence == sequence
    }

    /// Every key with a current entry, by domain and name, with its number of revisions.
    package func catalog() throws -> [KeyInfo] {
        try environment.read { txn in
            var infos: [KeyInfo] = []
            // While `history` has rows the links are stale: count every key's records in one read of the log.
            var counted: [[KeyName: Int]]?
            if try txn.count(dbs.legacyHistory) > 0 {
                var counts: [[KeyName: Int]] = [[:], [:]]
                try historyIndex.eventsOfTheLog(txn) { _, event in counts[Int(event.domain.rawValue)][KeyName(event.key), default: 0] += 1 }
                counted = counts
            }
            for domain in Domain.allCases {
                for (name, entry) in try viewEntries(domain, txn) {
                    let retention = try planner.retention(ofPrefix: HistoryKey.prefix(domain: domain, name: name), txn)
                    let revisions =
                        try counted.map { $0[Int(domain.rawValue)][KeyName(name)] ?? 0 }
                        ?? planner.retainedSequences(domain, name, keeping: retention, txn).count
                    infos.append(
                        KeyInfo(
                            name: name, domain: domain.name, policy: entry.policy, size: entry.payload.count, revisions: revisions,
                            lastWriter: entry.replica, lastChanged: entry.hlc, isSealed: entry.sealed, isRemoved: entry.op == .remove))
                }
            }
            return infos
        }
    }

    /// Sizes and counts of every database, from one snapshot.
    package func statistics() throws -> StoreStatistics {
        let fileBytes = (try? FileManager.default.attributesOfItem(atPath: path + "/data.mdb")[.size] as? NSNumber)??.intValue ?? 0
        // Environment figures take the environment's lock themselves: read them outside the transaction.
        let usedBytes = environment.usedBytes
        let mapSize = environment.mapSize
        return try environment.read { txn in
            let space = try relayOnly.relayOnlySpace(txn)
            return StoreStatistics(
                replicaID: replica, epoch: try EventLog.epoch(txn, dbs).hex, head: try LogHead.read(txn, dbs).sequence,
                records: try txn.count(dbs.events), defaultsKeys: try txn.count(dbs.defaults), secretKeys: try txn.count(dbs.secrets),
                dots: try txn.count(dbs.dots), deferred: try txn.count(dbs.deferred), checkpoints: try txn.count(dbs.peers),
                dataKeys: try tables.wrappedKeyIDs(txn).count, quarantined: try txn.count(dbs.quarantine), relayOnly: space.count,
                relayOnlyBytes: space.bytes, relayOnlyBySource: try relayOnly.relaySourceTallies(txn), usedBytes: usedBytes, fileBytes: fileBytes,
                mapSize: mapSize)
        }
    }

    /// Shrinks the data file at `path` to the pages in use (`mdb_env_copy2`, then
    /// an atomic rename), keeping the store's identity and every key and sequence: the bytes of
    /// freed pages (what purges and retention dropped) are not in the new file. No process may
    /// have it open. Removes a purge's mark (``PurgedBytes``).
    package static func reclaimSpace(path: String) throws {
        // The new file has a new inode (kept by the rename): record it in the copy before it
        // replaces the file, so no opener, crash or power cut ever sees the store as a copy.
        // Unless it is one already: a copied directory not opened since still records the
        // original's inode, and must keep looking like a copy (its next opening renews its
        // replica id and epoch).
        let home = LogMeta.fileIdentity(directory: path)
        try Environment.compactFile(at: path) { scratch in
            let environment = try Environment(path: scratch, options: .init())
            let dbs = try Databases(environment: environment)
            try environment.write { txn in
                guard try txn.get(dbs.meta, key: MetaKey.home) == home else { return }
                try txn.put(dbs.meta, key: MetaKey.home, value: LogMeta.fileIdentity(directory: scratch))
            }
        } replaced: {
            // Before any other process can attach again, so a purge of theirs leaves its own mark.
            PurgedBytes.clear(path: path)
        }
    }
}
