import Foundation
import ChronicleLMDB
import ChronicleSodium

extension EventLog {
    /// Rewrites the log in one transaction, keeping every key's winning event
    /// (tombstones until they are older than `tombstoneRetention` and every
    /// known peer acknowledged them), every event younger than `cutoff`, every
    /// event some known peer has not acknowledged, and events held by the drift
    /// guard. Record 1 becomes an anchor holding the old chain head; the log
    /// gets a new epoch. Current values do not change.
    func compact(cutoffMilliseconds: UInt64, tombstoneRetentionMilliseconds: UInt64) throws -> CompactionReport {
        let now = UnixMilliseconds.now()
        let report = try environment.write { txn -> CompactionReport in
            var head = try LogHead.read(txn, dbs)
            let oldEpoch = try Self.epoch(txn, dbs)

            // The lowest push checkpoint of this epoch over every known peer.
            var acknowledged: UInt64?
            try txn.scan(dbs.peers) { key, value in
                if let checkpoint = CheckpointKey(bytes: key), checkpoint.epoch == oldEpoch, checkpoint.direction == .push,
                    checkpoint.filterCode == RangeFilter.syncable.code, let value = CheckpointValue(bytes: value)
                {
                    acknowledged = min(acknowledged ?? .max, value.sequence)
                }
                return true
            }
            var waiting = Set<UInt64>()
            try txn.scan(dbs.deferred) { key, _ in
                if let sequence = UInt64(bigEndianBytes: Array(key.suffix(8))) { waiting.insert(sequence) }
                return true
            }
            var winners = Set<UInt64>()
            for domain in Domain.allCases {
                try txn.scan(dbs.view(domain)) { key, value in
                    winners.insert(try ViewEntry.decoding(value, key: String(decoding: key, as: UTF8.self)).sequence)
                    return true
                }
            }

            var kept: [Event] = []
            var droppedDots: [[UInt8]] = []
            var records = 0
            var opaque: [OpaqueEvent] = []
            try replayLog(txn, opaque: { _, item in opaque.append(item) }) { sequence, event in
                records += 1
                let unacknowledged = event.policy != .never && sequence > (acknowledged ?? .max)
                let young = event.hlc.milliseconds >= cutoffMilliseconds
                var keep = young || unacknowledged || waiting.contains(sequence)
                if winners.contains(sequence) {
                    let expiredTombstone = event.op == .remove && UnixMilliseconds.adding(tombstoneRetentionMilliseconds, to: event.hlc.milliseconds) < now
                    keep = keep || !expiredTombstone
                }
                if keep { kept.append(event) } else { droppedDots.append(event.dot) }
            }
            guard !droppedDots.isEmpty else {
                return CompactionReport(recordsBefore: records, dropped: 0, kept: kept.count, acknowledgedThrough: acknowledged)
            }

            // Rewrite: anchor, then the kept events in their order, re-chained.
            for database in [dbs.events, dbs.history, dbs.deferred, dbs.defaults, dbs.secrets] { try txn.clear(database) }
            let anchor = Anchor(previousEpoch: oldEpoch, previousHead: head.sequence, previousChain: head.chain, dropped: UInt64(droppedDots.count), time: now)
            // The anchor starts a new, unkeyed chain; a keyed log keys it again right after.
            let anchorHash = LogRecord.chainHash(previous: LogHead.empty.chain, sequence: 1, kind: .anchor, body: anchor.encoded(), key: nil)
            try txn.put(dbs.events, key: UInt64(1).bigEndianBytes, value: LogRecord(kind: .anchor, body: anchor.encoded(), hash: anchorHash).encoded(), flags: .append)
            head.sequence = 1
            head.chain = anchorHash
            if let id = head.chainKeyID {
                try appendChainKeyRecord(id, txn, &head)
                try txn.put(dbs.meta, key: MetaKey.chainInLog, value: [1])
            }
            for dot in droppedDots { try txn.put(dbs.dots, key: dot, value: UInt64(0).bigEndianBytes) }  // 0: compacted away
            let limit = UnixMilliseconds.adding(driftMilliseconds, to: now)
            for item in opaque {  // relay-only records: never judged, always kept
                try txn.delete(dbs.dots, key: Self.opaqueKey(item.bytes))
                try appendOpaque(item, txn, &head)
            }
            for event in kept {
                try txn.delete(dbs.dots, key: event.dot)
                let (sequence, _) = try append(event, txn, &head, indexView: event.hlc.milliseconds <= limit)
                if event.hlc.milliseconds > limit {
                    try txn.put(dbs.deferred, key: event.hlc.rawValue.bigEndianBytes + sequence.bigEndianBytes, value: [])
                }
            }
            try txn.put(dbs.meta, key: MetaKey.epoch, value: LogEpoch.random().bytes)  // before the head, whose MAC covers it
            try head.write(txn, dbs, chainKey: try chainKeys.key(head.chainKeyID))
            return CompactionReport(recordsBefore: records, dropped: droppedDots.count, kept: kept.count, acknowledgedThrough: acknowledged)
        }
        if report.dropped > 0 { observers.publishReset() }
        return report
    }
}
