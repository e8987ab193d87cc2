package import ChronicleFormat
import Foundation
import ChronicleLMDB
import ChronicleSodium

/// Compaction: rewrites the log without the events nothing needs (see `compact(cutoffMilliseconds:dropRelayOnly:progress:)`).
package struct Compaction: Sendable {
    let log: EventLog
}

extension EventLog {
    package var compaction: Compaction { Compaction(log: self) }
}

extension Compaction {
    /// A key of a view: the unit last-writer-wins decides over (its name by bytes, see ``KeyName``).
    private struct ViewKey: Hashable {
        var domain: Domain
        var name: KeyName
    }

    /// A record compaction keeps.
    private enum KeptRecord {
        case event(Event)
        case opaque(OpaqueEvent)
    }

    /// What a compaction keeps and drops, decided by reading the log twice.
    private struct CompactionPlan {
        /// Events the drift guard holds back (by sequence): kept, and held back again.
        var waiting = Set<UInt64>()
        /// The kept records in log order, with their old sequences.
        var kept: [(sequence: UInt64, record: KeptRecord)] = []
        /// Identities no longer in the log, per origin: dropped now, or compacted before.
        var dropped: [ReplicaID: [ClosedRange<UInt64>]] = [:]
        var droppedCount = 0
        var relayOnlyDropped = 0
        var records = 0

        var keptEvents: Int { kept.count { if case .event = $0.record { true } else { false } } }
    }

    /// Reports a compaction's work now and then: each record read twice, then each kept record
    /// written (counted as the records it stands for).
    private struct CompactionProgress {
        let total: UInt64
        var done: UInt64 = 0
        let report: (@Sendable (UInt64, UInt64) -> Void)?

        mutating func step(_ amount: UInt64 = 1) {
            let before = done
            done += amount
            if let report, before / 4096 != done / 4096 { report(done, total) }
        }
    }

    /// Rewrites the log in one transaction, dropping only events that a kept event
    /// of the same key dominates and that are older than `cutoff`.
    ///
    /// Kept, whatever their age: every key's winning event (sets and removes alike),
    /// every key's greatest event that may leave this replica (so a device-only
    /// winner never hides a replicated value from peers), events held by the drift
    /// guard, and relay-only records. So no current value changes, here or on any
    /// replica that syncs with this one later, however long it was away. Dropped
    /// identities are kept as ranges per origin; record 1 becomes an anchor holding
    /// the old chain head; the log gets a new epoch, and push checkpoints are carried
    /// over to the new sequence numbers.
    /// With `dropRelayOnly`, relay-only records (items this build cannot read, kept to relay) go too.
    /// - Parameter progress: called now and then with (work done, work in all): two reads of the
    ///   log and one rewrite, a record each.
    package func compact(
        cutoffMilliseconds: UInt64, dropRelayOnly: Bool = false, progress: (@Sendable (UInt64, UInt64) -> Void)? = nil
    ) throws -> CompactionReport {
        let now = UnixMilliseconds.now()
        // `.whenAppended`: a compaction with nothing to drop commits nothing (the drift guard's
        // promotions, if any, write their own clock).
        let report = try log.withHead(.whenAppended) { txn, head -> CompactionReport in
            var meter = CompactionProgress(total: head.sequence * 3, report: progress)
            let oldEpoch = try EventLog.epoch(txn, log.dbs)
            // Events whose time has come join the views first, moving the clock past them (as
            // their promotion would); every other decision of the drift guard is kept as it is.
            try log.driftGuard.promoteDue(txn, head: &head, now: now)
            var plan = try planCompaction(cutoffMilliseconds: cutoffMilliseconds, dropRelayOnly: dropRelayOnly, &meter, txn)
            guard plan.droppedCount > 0 || plan.relayOnlyDropped > 0 else {
                return CompactionReport(recordsBefore: plan.records, dropped: 0, kept: plan.keptEvents, checkpointsCarried: 0)
            }
            let carried = try takePushCheckpoints(epoch: oldEpoch, head: head, txn)
            try addIdentitiesCompactedBefore(to: &plan, txn)
            let anchor = Anchor(
                previousEpoch: oldEpoch, previousHead: head.sequence, previousChain: head.chain, dropped: UInt64(plan.droppedCount), time: now)
            let moved = try rewrite(plan, after: anchor, &meter, txn, &head)
            progress?(meter.total, meter.total)
            let epoch = LogEpoch.random()
            try carry(carried, to: epoch, through: moved, txn)
            if dropRelayOnly { try forgetRelaySourceTallies(txn) }
            try txn.put(log.dbs.meta, key: MetaKey.epoch, value: epoch.bytes)  // before the head is written: its MAC covers it
            return CompactionReport(
                recordsBefore: plan.records, dropped: plan.droppedCount, kept: plan.keptEvents, checkpointsCarried: carried.count,
                relayOnlyDropped: plan.relayOnlyDropped)
        }
        if report.dropped > 0 || report.relayOnlyDropped > 0 { log.observers.publishReset() }
        return report
    }

    /// Reads the log twice: first for what must stay whatever its age (view entries, events
    /// held back, each key's greatest replicating event), then to sort every record into kept
    /// or dropped.
    private func planCompaction(
        cutoffMilliseconds: UInt64, dropRelayOnly: Bool, _ meter: inout CompactionProgress, _ txn: borrowing Transaction
    ) throws -> CompactionPlan {
        var plan = CompactionPlan()
        plan.waiting = try log.driftGuard.waiting(txn)
        var keep = plan.waiting
        for domain in Domain.allCases {
            try txn.scan(log.dbs.view(domain)) { key, value in
                keep.insert(try ViewEntry.decoding(value, key: String(decoding: key, as: UTF8.self)).sequence)
                return true
            }
        }
        // The greatest event of each key that replicates: it must outlive a newer `.never` winner.
        var replicated: [ViewKey: (order: ConflictOrder, sequence: UInt64)] = [:]
        _ = try log.replayer.replayLog(txn) { sequence, event in
            meter.step()
            guard event.policy != .never, !plan.waiting.contains(sequence) else { return }
            let key = ViewKey(domain: event.domain, name: KeyName(event.key))
            if let best = replicated[key], best.order > event.order { return }
            replicated[key] = (event.order, sequence)
        }
        for best in replicated.values { keep.insert(best.sequence) }

        let visitOpaque = { (sequence: UInt64, item: OpaqueEvent) in
            if dropRelayOnly { plan.relayOnlyDropped += 1 } else { plan.kept.append((sequence, .opaque(item))) }
        }
        _ = try log.replayer.replayLog(txn, opaque: visitOpaque) { sequence, event in
            meter.step()
            plan.records += 1
            if keep.contains(sequence) || event.hlc.milliseconds >= cutoffMilliseconds {
                plan.kept.append((sequence, .event(event)))
            } else {
                plan.dropped[event.origin, default: []].append(event.counter...event.counter)
                plan.droppedCount += 1
            }
        }
        return plan
    }

    /// Removes the push checkpoints (this log's sequences) and returns those worth carrying
    /// over: of this epoch, inside the log, and matching the old chain (else stale already).
    private func takePushCheckpoints(
        epoch: LogEpoch, head: LogHead, _ txn: borrowing Transaction
    ) throws -> [(key: CheckpointKey, value: CheckpointValue)] {
        var pushes: [(key: CheckpointKey, value: CheckpointValue)] = []
        try txn.scan(log.dbs.peers) { key, value in
            if let checkpoint = CheckpointKey(bytes: key), checkpoint.direction == .push { pushes.append((checkpoint, CheckpointValue(bytes: value) ?? .zero)) }
            return true
        }
        var carried: [(key: CheckpointKey, value: CheckpointValue)] = []
        for push in pushes {
            try txn.delete(log.dbs.peers, key: push.key.bytes)
            guard push.key.epoch == epoch, push.value.sequence > 0, push.value.sequence <= head.sequence else { continue }
            if let chain = push.value.chain, try !log.gaps.chainMatches(at: push.value.sequence, chain, txn) { continue }
            carried.append(push)
        }
        return carried
    }

    /// Adds to the plan the identities compacted before (ranges, or zero rows from format 1).
    private func addIdentitiesCompactedBefore(to plan: inout CompactionPlan, _ txn: borrowing Transaction) throws {
        try txn.scan(log.dbs.dots) { key, value in
            if let stored = CompactedIdentities.parse(key: key, value: value) {
                plan.dropped[stored.origin, default: []].append(stored.range)
            } else if key.count == 24, value == UInt64(0).bigEndianBytes, let origin = ReplicaID(bytes: Array(key.prefix(16))),
                let counter = UInt64(bigEndianBytes: Array(key.suffix(8)))
            {
                plan.dropped[origin, default: []].append(counter...counter)
            }
            return true
        }
    }

    /// Clears the log, its indexes and views, and writes them again: the compacted identities,
    /// the anchor, then the kept records in their order, re-chained. Returns where each kept
    /// record went: (old sequence, new sequence, new chain hash), in order, the anchor first.
    private func rewrite(
        _ plan: CompactionPlan, after anchor: Anchor, _ meter: inout CompactionProgress, _ txn: borrowing Transaction, _ head: inout LogHead
    ) throws -> [(old: UInt64, new: UInt64, chain: [UInt8])] {
        var present: [ReplicaID: [UInt64]] = [:]
        for item in plan.kept {
            if case let .event(event) = item.record, plan.dropped[event.origin] != nil { present[event.origin, default: []].append(event.counter) }
        }
        for database in [log.dbs.events, log.dbs.latest, log.dbs.previous, log.dbs.legacyHistory, log.dbs.deferred, log.dbs.defaults, log.dbs.secrets, log.dbs.dots] { try txn.clear(database) }
        for (origin, ranges) in plan.dropped {
            for range in CompactedIdentities.merge(compacted: ranges, present: present[origin] ?? []) {
                try txn.put(log.dbs.dots, key: CompactedIdentities.key(origin: origin, last: range.upperBound), value: range.lowerBound.bigEndianBytes)
            }
        }
        // The anchor starts a new, unkeyed chain; a keyed log keys it again right after.
        head.sequence = 0
        head.chain = LogHead.empty.chain
        try log.appendRecord(LogRecord.unchained(.anchor, body: anchor.encoded()), key: nil, txn, &head)
        if let id = head.chainKeyID {
            try log.keyRecords.appendChainKeyRecord(id, txn, &head)
            try txn.put(log.dbs.meta, key: MetaKey.chainInLog, value: [1])
        }
        var moved: [(old: UInt64, new: UInt64, chain: [UInt8])] = [(0, head.sequence, head.chain)]
        moved.reserveCapacity(plan.kept.count + 1)
        meter.done = 2 * anchor.previousHead
        let share = max(1, anchor.previousHead / UInt64(max(plan.kept.count, 1)))
        for item in plan.kept {
            meter.step(share)
            switch item.record {
            case let .opaque(opaque):  // relay-only records: never judged, always kept
                try log.appendOpaque(opaque, txn, &head)
            case let .event(event):
                // In the views exactly when it was before (a clock set back since must not hide a current value).
                let held = plan.waiting.contains(item.sequence)
                let (sequence, _) = try log.append(event, txn, &head, indexView: !held)
                if held {
                    try log.driftGuard.hold(event.hlc, sequence: sequence, txn)
                }
            }
            moved.append((item.sequence, head.sequence, head.chain))
        }
        return moved
    }

    /// Writes each carried push checkpoint under the new epoch, at the last kept record at or
    /// before it: everything after that is still to send.
    private func carry(
        _ carried: [(key: CheckpointKey, value: CheckpointValue)], to epoch: LogEpoch, through moved: [(old: UInt64, new: UInt64, chain: [UInt8])],
        _ txn: borrowing Transaction
    ) throws {
        for push in carried {
            var low = 0
            var high = moved.count - 1
            while low < high {
                let middle = (low + high + 1) / 2
                if moved[middle].old <= push.value.sequence { low = middle } else { high = middle - 1 }
            }
            var value = push.value
            value.sequence = moved[low].new
            value.chain = moved[low].chain
            try txn.put(log.dbs.peers, key: push.key.withEpoch(epoch).bytes, value: value.encoded())
        }
    }

    /// Forgets every source's tally of relay-only records (they are gone).
    private func forgetRelaySourceTallies(_ txn: borrowing Transaction) throws {
        var tallies: [[UInt8]] = []
        try txn.scan(log.dbs.meta, from: MetaKey.relaySourcePrefix) { key, _ in
            guard key.starts(with: MetaKey.relaySourcePrefix) else { return false }
            tallies.append(key)
            return true
        }
        for key in tallies { try txn.delete(log.dbs.meta, key: key) }
    }
}
