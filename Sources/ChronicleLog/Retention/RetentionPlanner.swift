import ChronicleFormat
import ChronicleLMDB
import ChronicleSodium
import Synchronization

/// Which of a key's records retention keeps: the key's rule (its `retention` row, else the
/// store's default) and the records a pass may drop. It drops nothing: the sweep
/// (``RetentionSweeper``) and a purge drop what it plans. A write records through it the rule a
/// key declares (``recordRetention(of:prefix:_:_:)``), in the write's transaction.
///
/// Kept, whatever the key's retention: its newest records (by sequence, as many as it keeps), its
/// winning record (sets and removes alike), its greatest record that may leave this replica when
/// the winner may not (so a device-only winner never hides a replicated value from peers), and
/// records the drift guard holds back. So no current value changes, here or on any replica that
/// syncs with this one later.
package struct RetentionPlanner: Sendable {
    /// What it reads: the log's storage, the drift guard's held-back records, retention's state.
    let storage: LogStorage
    let driftGuard: DriftGuard
    let bookkeeping: RetentionBookkeeping

    private var dbs: Databases { storage.dbs }
    private var historyIndex: HistoryIndex { HistoryIndex(storage: storage) }
}

extension EventLog {
    package var retentionPlanner: RetentionPlanner { RetentionPlanner(storage: storage, driftGuard: driftGuard, bookkeeping: retention) }
}

extension RetentionPlanner {
    // MARK: - The rules

    /// The retention of the key whose history prefix is `prefix`: what it declared when this
    /// store last wrote it, else the store's default.
    func retention(ofPrefix prefix: [UInt8], _ txn: borrowing Transaction) throws -> Retention {
        guard let bytes = try txn.get(dbs.retention, key: prefix), bytes.count == 4 else { return bookkeeping.defaultRetention }
        return Retention(rule: UInt32(bigEndianBytes: bytes) ?? 0)
    }

    /// Records the retention a typed key declared with the change (no row: the default), when it
    /// differs from the row there; a change that declares nothing leaves the row alone. The rows
    /// come from ``RetentionRules``, which the transaction takes at its first such change and
    /// checks against `meta`'s token then (another process may have changed a row): no lookup a
    /// change once a key's row is known. A changed row writes a new token.
    /// - Parameter prefix: the key's history prefix (``HistoryKey``).
    func recordRetention(of change: PendingChange, prefix: [UInt8], _ txn: borrowing Transaction, _ head: inout LogHead) throws {
        guard let declared = change.retention.map({ $0?.rule }) else { return }
        var rules: RetentionRules
        if let taken = head.retentionRules.take() {  // taken, not copied: a copy would copy the rows at the next change
            rules = taken
        } else {
            rules = bookkeeping.rules.withLock { $0.take() }
            rules.check(against: try txn.get(dbs.meta, key: MetaKey.retentionRules) ?? [])
        }
        defer { head.retentionRules = rules }
        let stored: UInt32?
        if let known = rules.row(prefix) {
            stored = known
        } else {
            stored = try txn.get(dbs.retention, key: prefix).flatMap { UInt32(bigEndianBytes: $0) }
            rules.remember(prefix, stored)
        }
        guard stored != declared else { return }
        if let declared {
            try txn.put(dbs.retention, key: prefix, value: declared.bigEndianBytes)
        } else {
            _ = try txn.delete(dbs.retention, key: prefix)
        }
        let token = Sodium.randomBytes(16)
        try txn.put(dbs.meta, key: MetaKey.retentionRules, value: token)
        rules.changed(prefix, to: declared, token: token)
    }

    // MARK: - Which records go

    /// What retention drops of one key, decided in one transaction.
    struct KeyDrops {
        var domain: Domain
        var name: String
        /// Every record of the key, newest first.
        var sequences: [UInt64]
        /// The records to drop, with their events.
        var dropped: [(sequence: UInt64, event: Event)]
        /// Whether records beyond this step's budget remain to drop.
        var unfinished: Bool
    }

    /// The records of a key that `retention` keeps, newest first (what `history(of:)` shows).
    /// - Parameter known: the key's history (newest first), when the caller read it already.
    func retainedSequences(
        _ domain: Domain, _ name: String, keeping retention: Retention, known: [UInt64]? = nil, _ txn: borrowing Transaction
    ) throws -> [UInt64] {
        let sequences = try known ?? historyIndex.historySequences(domain, name, txn)
        guard let plan = try planDrops(domain, name, sequences: sequences, keeping: retention, budget: .max, txn) else { return sequences }
        let dropped = Set(plan.dropped.map(\.sequence))
        return sequences.filter { !dropped.contains($0) }
    }

    /// The records of a key that `retention` drops, oldest first, at most `budget`; `nil` when none.
    func planDrops(
        _ domain: Domain, _ name: String, sequences: [UInt64], keeping retention: Retention, budget: Int, _ txn: borrowing Transaction
    ) throws -> KeyDrops? {
        guard let keep = retention.keptRevisions, sequences.count > keep else { return nil }
        let winner = try txn.get(dbs.view(domain), key: Array(name.utf8)).map { try ViewEntry.decoding($0, key: name) }
        // The winner is the greatest record in the views; when it may leave this replica, no other
        // record that may is greater. Otherwise the greatest one that may is kept too.
        var replicated: UInt64?
        if let winner, winner.policy == .never {
            var best: ConflictOrder?
            for sequence in sequences {
                let event = try event(at: sequence, txn)
                guard event.policy != .never, try !isHeldBack(event, sequence, txn) else { continue }
                if best.map({ event.order > $0 }) ?? true {
                    best = event.order
                    replicated = sequence
                }
            }
        }
        var dropped: [(sequence: UInt64, event: Event)] = []
        var unfinished = false
        for sequence in sequences[keep...].reversed() {  // oldest first
            if sequence == winner?.sequence || sequence == replicated { continue }
            let event = try event(at: sequence, txn)
            if try isHeldBack(event, sequence, txn) { continue }
            if dropped.count >= budget {
                unfinished = true
                break
            }
            dropped.append((sequence, event))
        }
        guard !dropped.isEmpty else { return nil }
        return KeyDrops(domain: domain, name: name, sequences: sequences, dropped: dropped, unfinished: unfinished)
    }

    /// The event at `sequence`, which the history index names.
    private func event(at sequence: UInt64, _ txn: borrowing Transaction) throws -> Event {
        guard let bytes = try txn.get(dbs.events, key: sequence.bigEndianBytes) else {
            throw ChronicleError.corruptRecord(sequence: sequence, reason: "indexed in history but missing from the log")
        }
        return try LogRecord(decoding: bytes, sequence: sequence).event(sequence: sequence)
    }

    private func isHeldBack(_ event: Event, _ sequence: UInt64, _ txn: borrowing Transaction) throws -> Bool {
        try driftGuard.holds(event.hlc, sequence: sequence, txn)
    }

    /// Splits a history prefix (``HistoryKey``) into its domain and name.
    static func key(ofPrefix prefix: [UInt8]) -> (domain: Domain, name: String)? {
        guard prefix.count >= 3, let domain = Domain(rawValue: prefix[0]), Int(prefix[1]) == prefix.count - 2 else { return nil }
        return (domain, String(decoding: prefix[2...], as: UTF8.self))
    }
}
