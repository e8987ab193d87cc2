package import ChronicleFormat
import ChronicleLMDB
import ChronicleSodium
import Dispatch
import Logging
import Synchronization

/// Retention's drops: the automatic compaction, which drops in short steps what each key's rule
/// does not keep (as ``RetentionPlanner`` decides), and dropping a key's history at once. Kept
/// records keep their sequences and chain hashes; dropped ones become gap records (``Gap``), and
/// their identities compacted ranges.
///
/// It holds the log because it writes: each step is a write transaction of the log's
/// (``EventLog/withHead(_:_:)``, which checks and rewrites the head) that may drop records.
package struct RetentionSweeper: Sendable {
    let log: EventLog

    private var environment: Environment { log.environment }
    private var dbs: Databases { log.dbs }
    private var planner: RetentionPlanner { log.retentionPlanner }
}

extension EventLog {
    package var sweeper: RetentionSweeper { RetentionSweeper(log: self) }
}

extension RetentionSweeper {
    /// Records one step of the automatic compaction drops at most (one write transaction). A
    /// step holds the write lock, so a local write beside a compaction catching up waits for
    /// about one: 256 drops (about 15 M instructions) kept a batch on keys with 300 revisions at
    /// 8–19 ms where 4,096 made it 30–40 ms; the price is a durable commit per 256 drops, so such
    /// a backlog takes seconds longer to drop (docs/BENCHMARKS.md). A pass on keys written once
    /// each drops at most one record a key, and its steps of ``keysPerStep`` keys fit anyway.
    static let maxDropsPerStep = 256
    /// Keys one step of the automatic compaction looks at.
    static let keysPerStep = 256

    // MARK: - Dropping a key's history at once

    /// Drops every record of a key that its current value does not need, in one transaction,
    /// whatever its retention: what ``Retention/latest`` keeps stays.
    /// - Returns: the number of records dropped.
    package func purgeHistory(_ domain: Domain, _ name: String) throws -> Int {
        try log.withHead(.whenAppended) { txn, head in
            let sequences = try log.historyIndex.historySequences(domain, name, txn)
            guard let plan = try planner.planDrops(domain, name, sequences: sequences, keeping: .latest, budget: .max, txn) else { return 0 }
            // Marked before the commit, under the write lock every process shares (``PurgedBytes``).
            if !plan.dropped.isEmpty { try PurgedBytes.mark(path: log.path) }
            var identities: [ReplicaID: [UInt64]] = [:]
            try log.gaps.drop(plan, txn, &head, identities: &identities)
            try log.gaps.recordDropped(identities, txn)
            return plan.dropped.count
        }
    }

    // MARK: - The automatic compaction

    /// Tells the schedule of the records a write transaction appended (their keys' history
    /// prefixes, one a record), then starts a pass of the automatic compaction on a utility thread
    /// when one is due and none runs: after every write transaction, and when the log opens. One
    /// lock a transaction.
    /// - Parameter beyond: records appended whose keys were not listed (a pass over every key follows).
    func sweepIfDue(noting appended: [[UInt8]], beyond: Int = 0) {
        let passes = log.retention.passes
        // Started and counted under one lock, so a closing log's wait never misses a pass.
        let started = log.retention.schedule.withLock { schedule -> SweepSchedule.Work? in
            schedule.appended(appended, beyond: beyond)
            guard let work = schedule.start() else { return nil }
            passes.enter()
            return work
        }
        guard let work = started else { return }
        DispatchQueue.global(qos: .utility).async { [weak log] in
            // Left after the last use of `log`: once a closing log's wait returns, no pass holds it.
            defer { passes.leave() }
            var next: SweepSchedule.Work? = work
            while let work = next {
                var unfinished: [[UInt8]] = []
                do {
                    unfinished = try log?.sweeper.sweep(work).unfinished ?? []
                } catch {
                    log?.logger.debug("chronicle: automatic compaction stopped", metadata: ["error": "\(ChronicleError.wrap(error))"])
                }
                // When the writes that landed during the pass made another due, it follows at
                // once: they are not left waiting for a write that may never come.
                next = log?.retention.schedule.withLock { schedule in
                    schedule.finish(unfinished: unfinished)
                    return schedule.start()
                }
            }
        }
    }

    /// Runs one pass in steps of at most ``keysPerStep`` keys and ``maxDropsPerStep`` records, each
    /// its own write transaction (a step that finds nothing to drop opens none). Stops when the
    /// log closes. Returns the records it dropped, and the keys it left unfinished.
    func sweep(_ work: SweepSchedule.Work) throws -> (dropped: Int, unfinished: [[UInt8]]) {
        var dropped = 0
        var cursor: [UInt8]?
        var queue: ArraySlice<[UInt8]> = []
        if case let .keys(keys) = work { queue = Set(keys.map(HashedPrefix.init)).map(\.bytes)[...] }  // one look a key, however often it was written
        while true {
            // The next keys: from the snapshot, or the next rows of `latest`.
            var batch: [[UInt8]] = []
            switch work {
            case .keys:
                batch = Array(queue.prefix(Self.keysPerStep))
                queue = queue.dropFirst(batch.count)
            case .everyKey:
                try environment.read { txn in
                    let start = cursor.map { $0 + [0] }
                    try txn.scan(dbs.latest, from: start) { key, _ in
                        batch.append(key)
                        return batch.count < Self.keysPerStep
                    }
                }
                cursor = batch.last
            }
            if batch.isEmpty { return (dropped, []) }
            var step = try sweepStep(batch, writtenSince: work != .everyKey)
            dropped += step.dropped
            // A key with more to drop than one step's budget: again, in steps, until it is done.
            while step.open, !step.unfinished.isEmpty {
                step = try sweepStep(step.unfinished, writtenSince: false)
                dropped += step.dropped
            }
            guard step.open else { return (dropped, batch) }
        }
    }

    /// One step over `prefixes`: finds what they drop in a read transaction, then drops it in a
    /// write transaction (deciding again there). `open` is false once the log is closing.
    ///
    /// The read transaction counts each key's records from what the last passes counted
    /// (``SweepSchedule/revisionCounts(_:epoch:)``): only the records appended since are walked,
    /// and a key a pass left at its limit goes to the write transaction without a walk when it
    /// was written since (`writtenSince`: the keys of a ``SweepSchedule/Work/keys(_:)`` pass).
    private func sweepStep(_ prefixes: [[UInt8]], writtenSince: Bool) throws -> (open: Bool, dropped: Int, unfinished: [[UInt8]]) {
        var counted: [(prefix: [UInt8], count: RevisionCount?)] = []
        var epoch: [UInt8] = []
        let candidates = try environment.read { txn -> [[UInt8]] in
            guard try txn.count(dbs.legacyHistory) == 0 else { return [] }  // the next write reindexes first
            epoch = try Self.epochBytes(txn, dbs)
            let known = log.retention.schedule.withLock { $0.revisionCounts(prefixes, epoch: epoch) }
            var candidates: [[UInt8]] = []
            for (prefix, hint) in zip(prefixes, known) {
                guard let keep = try planner.retention(ofPrefix: prefix, txn).keptRevisions else { continue }
                if writtenSince, let hint, hint.count >= keep {  // at its limit, and written since
                    candidates.append(prefix)
                    continue
                }
                let count = try log.historyIndex.revisionCount(prefix, txn, known: hint, limit: keep, walked: log.retention.linksWalked)
                if let count, count.count > keep { candidates.append(prefix) } else { counted.append((prefix, count)) }
            }
            return candidates
        }
        // Remembered under the epoch they were counted in (a compaction may renumber the log
        // before the write transaction, whose counts are then of another epoch).
        let stopped = log.retention.schedule.withLock { schedule in
            schedule.found(counted, epoch: epoch)
            return schedule.stopped
        }
        guard !stopped else { return (false, 0, []) }
        guard !candidates.isEmpty else { return (true, 0, []) }
        let (dropped, unfinished) = try log.withHead(.whenAppended) { txn, head -> (Int, [[UInt8]]) in
            // A write that finds the map full runs this again from scratch: nothing of a run
            // that was rolled back may be remembered (its counts assume drops that never happened).
            counted = []
            epoch = try Self.epochBytes(txn, dbs)
            var budget = Self.maxDropsPerStep
            var unfinished: [[UInt8]] = []
            var identities: [ReplicaID: [UInt64]] = [:]
            for prefix in candidates {
                guard let key = RetentionPlanner.key(ofPrefix: prefix) else { continue }
                guard budget > 0 else {
                    unfinished.append(prefix)
                    continue
                }
                let sequences = try log.historyIndex.historySequences(key.domain, key.name, txn)
                let retention = try planner.retention(ofPrefix: prefix, txn)
                let plan = try planner.planDrops(key.domain, key.name, sequences: sequences, keeping: retention, budget: budget, txn)
                let kept = sequences.count - (plan?.dropped.count ?? 0)
                // The newest records are the ones kept: the latest stays unless nothing does.
                counted.append((prefix, kept > 0 ? sequences.first.map { RevisionCount(latest: $0, count: kept) } : nil))
                guard let plan else { continue }
                try log.gaps.drop(plan, txn, &head, identities: &identities)
                budget -= plan.dropped.count
                if plan.unfinished { unfinished.append(prefix) }
            }
            try log.gaps.recordDropped(identities, txn)
            return (Self.maxDropsPerStep - budget, unfinished)
        }
        log.retention.schedule.withLock { $0.found(counted, epoch: epoch) }
        return (true, dropped, unfinished)
    }

    /// The log's epoch as `meta` holds it, compared as bytes only (an entry a damaged store
    /// mangled is `verify`'s to report; here it only labels the counts a pass remembers).
    private static func epochBytes(_ txn: borrowing Transaction, _ dbs: Databases) throws -> [UInt8] {
        try txn.get(dbs.meta, key: MetaKey.epoch) ?? []
    }

    /// Applies every key's retention now, over the whole log, in the same steps as the automatic
    /// compaction (which may run beside it: each step decides again in its own transaction).
    /// - Returns: the number of records dropped.
    package func applyRetention() throws -> Int {
        try sweep(.everyKey).dropped
    }

    /// Stops the automatic compaction: the log is closing. Waits for a pass in progress to end,
    /// which it does at its next step, so the log closes when its last lease ends (a reclaim of
    /// the file right after must not find it open).
    package func stopSweeping() {
        log.retention.schedule.withLock { $0.stop() }
        log.retention.passes.wait()
    }

    /// Returns once no pass of the automatic compaction runs.
    package func waitForPasses() {
        log.retention.passes.wait()
    }

    /// Lets the automatic compaction run again: a closing log was leased again.
    package func resumeSweeping() {
        log.retention.schedule.withLock { $0.resume() }
    }
}
