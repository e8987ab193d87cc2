import Foundation
import ChronicleLMDB

extension EventLog {
    // MARK: - Checkpoints

    /// The last sequence acknowledged under `key` (0 when none).
    func checkpoint(_ key: CheckpointKey) throws -> UInt64 {
        try environment.read { txn in
            try txn.get(dbs.peers, key: key.bytes).flatMap { UInt64(bigEndianBytes: $0) } ?? 0
        }
    }

    func setCheckpoint(_ key: CheckpointKey, to value: UInt64) throws {
        try environment.write { txn in try txn.put(dbs.peers, key: key.bytes, value: value.bigEndianBytes) }
    }

    /// This log's epoch: renewed whenever its sequence numbers are rewritten.
    func epoch() throws -> LogEpoch {
        try environment.read { txn in try Self.epoch(txn, dbs) }
    }

    static func epoch(_ txn: borrowing Transaction, _ dbs: Databases) throws -> LogEpoch {
        guard let bytes = try txn.get(dbs.meta, key: MetaKey.epoch) else { return .zero }
        guard let epoch = LogEpoch(bytes: bytes) else {
            throw ChronicleError.corruptMeta(entry: "epoch", reason: "\(bytes.count) bytes, not \(LogEpoch.byteCount)")
        }
        return epoch
    }

    // MARK: - Export

    /// Cuts the range of this log after `after`: at most `maxEvents` events and
    /// about `maxBytes` bytes (at least one event), with the keys they need.
    func exportRange(
        after: UInt64, filter: RangeFilter?, excluding: ReplicaID?, maxEvents: Int, maxBytes: Int, through last: UInt64 = .max
    ) throws -> EventRange {
        try environment.read { txn in
            let head = try LogHead.read(txn, dbs)
            let start = min(after, head.sequence)
            var events: [Event] = []
            var keyIDs: [KeyID] = []
            var bytes = 0
            var upTo = start
            try txn.scan(dbs.events, from: (start + 1).bigEndianBytes) { key, value in
                guard let sequence = UInt64(bigEndianBytes: key), sequence <= last else { return false }
                let record = try LogRecord(decoding: value, sequence: sequence)
                if record.kind == .anchor {
                    upTo = sequence
                    return true
                }
                let event = try record.event(sequence: sequence)
                if filter?.admits(event) ?? true, event.origin != excluding {
                    if !events.isEmpty, events.count >= maxEvents || bytes + event.payload.count > maxBytes { return false }
                    events.append(event)
                    bytes += event.payload.count + 64
                    if event.sealed, let envelope = try? Envelope(decoding: event.payload), !keyIDs.contains(envelope.keyID) {
                        keyIDs.append(envelope.keyID)
                    }
                }
                upTo = sequence
                return true
            }
            let keys = try keyIDs.compactMap { id in
                try txn.get(dbs.meta, key: MetaKey.wrappedKey(id)).flatMap { try? WrappedKey(decoding: $0) }
            }
            return EventRange(source: replica, epoch: try Self.epoch(txn, dbs), after: start, upTo: upTo, head: head.sequence, keys: keys, events: events)
        }
    }

    // MARK: - Import

    /// Applies a received range in one transaction: new events are appended and
    /// indexed, known ones are skipped, and the optional checkpoint advances in
    /// the same transaction. Any malformed or conflicting event fails the whole range.
    func importRange(
        _ range: EventRange, checkpoint: (key: CheckpointKey, value: UInt64)?, requireSealedDefaults: Bool
    ) throws -> RangeReceipt {
        var committed: [CommittedEvent] = []
        let receipt = try environment.write { txn in
            committed = []
            var receipt = RangeReceipt()
            receipt.received = range.events.count
            var head = try LogHead.read(txn, dbs)
            let now = UnixMilliseconds.now()
            try EventLog.promoteDeferred(txn, dbs, now: now, driftMilliseconds: driftMilliseconds)
            for key in range.keys where try txn.get(dbs.meta, key: MetaKey.wrappedKey(key.id)) == nil {
                try txn.put(dbs.meta, key: MetaKey.wrappedKey(key.id), value: key.encoded())
                receipt.keys += 1
            }
            for (index, event) in range.events.enumerated() {
                if let known = try txn.get(dbs.dots, key: event.dot).flatMap({ UInt64(bigEndianBytes: $0) }) {
                    if known == 0 {  // compacted away here: known, content no longer comparable
                        receipt.duplicates += 1
                        continue
                    }
                    guard let bytes = try txn.get(dbs.events, key: known.bigEndianBytes) else {
                        throw ChronicleError.corruptRecord(sequence: known, reason: "in the dots index but missing from the log")
                    }
                    let stored = try LogRecord(decoding: bytes, sequence: known).event(sequence: known)
                    guard stored == event else {
                        throw ChronicleError.malformedInput(
                            "event \(index) (\(event.origin.short):\(event.counter)) differs from the event this replica has with the same identity")
                    }
                    receipt.duplicates += 1
                    continue
                }
                if event.domain == .secrets && !event.sealed {
                    throw ChronicleError.malformedInput("event \(index) is an unsealed secret (key \"\(event.key)\")")
                }
                if requireSealedDefaults && !event.sealed {
                    throw ChronicleError.malformedInput("event \(index) is unsealed; this store seals every value (key \"\(event.key)\")")
                }
                let deferred = event.hlc.milliseconds > now + driftMilliseconds
                if !deferred { head.hlc = max(head.hlc, event.hlc) }
                if event.origin == replica { head.counter = max(head.counter, event.counter) }
                let (sequence, won) = try append(event, txn, &head, indexView: !deferred)
                if deferred {
                    try txn.put(dbs.deferred, key: event.hlc.rawValue.bigEndianBytes + sequence.bigEndianBytes, value: [])
                    receipt.deferred += 1
                }
                receipt.applied += 1
                committed.append(CommittedEvent(sequence: sequence, event: event, isWinner: won))
            }
            try head.write(txn, dbs)
            if let checkpoint { try txn.put(dbs.peers, key: checkpoint.key.bytes, value: checkpoint.value.bigEndianBytes) }
            return receipt
        }
        if !committed.isEmpty { observers.publish(committed) }
        return receipt
    }

    /// Moves events whose time has come from the drift guard's waiting list into the views.
    static func promoteDeferred(_ txn: borrowing Transaction, _ dbs: Databases, now: UInt64, driftMilliseconds: UInt64) throws {
        var due: [([UInt8], UInt64)] = []
        try txn.scan(dbs.deferred) { key, _ in
            guard key.count == 16, let hlc = UInt64(bigEndianBytes: Array(key.prefix(8))),
                let sequence = UInt64(bigEndianBytes: Array(key.suffix(8)))
            else { return false }
            guard HLC(rawValue: hlc).milliseconds <= now + driftMilliseconds else { return false }
            due.append((key, sequence))
            return true
        }
        for (key, sequence) in due {
            if let bytes = try txn.get(dbs.events, key: sequence.bigEndianBytes) {
                let event = try LogRecord(decoding: bytes, sequence: sequence).event(sequence: sequence)
                try indexView(event, sequence: sequence, txn, dbs)
            }
            try txn.delete(dbs.deferred, key: key)
        }
    }
}
