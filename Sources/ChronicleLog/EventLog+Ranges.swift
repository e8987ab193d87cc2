package import ChronicleFormat
import Foundation
import Synchronization
import Logging
package import ChronicleLMDB
import ChronicleSodium

extension EventLog {
    // MARK: - Checkpoints

    /// The checkpoint stored under `key` (sequence 0 when none).
    package func checkpoint(_ key: CheckpointKey) throws -> CheckpointValue {
        try environment.read { txn in
            try txn.get(dbs.peers, key: key.bytes).flatMap { CheckpointValue(bytes: $0) } ?? .zero
        }
    }

    package func setCheckpoint(_ key: CheckpointKey, to value: CheckpointValue) throws {
        try environment.write { txn in try txn.put(dbs.peers, key: key.bytes, value: value.encoded()) }
    }

    /// This log's epoch: renewed whenever its sequence numbers are rewritten.
    package func epoch() throws -> LogEpoch {
        try environment.read { txn in try Self.epoch(txn, dbs) }
    }

    package static func epoch(_ txn: borrowing Transaction, _ dbs: Databases) throws -> LogEpoch {
        guard let bytes = try txn.get(dbs.meta, key: MetaKey.epoch) else { return .zero }
        guard let epoch = LogEpoch(bytes: bytes) else {
            throw ChronicleError.corruptMeta(entry: "epoch", reason: "\(bytes.count) bytes, not \(LogEpoch.byteCount)")
        }
        return epoch
    }

    // MARK: - Export

    /// Cuts the range of this log after `after`: at most `maxEvents` events and
    /// about `maxBytes` bytes (at least one event), with the wrapped keys they need
    /// (for their seals and their authenticators), each in its travel wrap when it has one.
    /// Events this build cannot read travel as the opaque bytes they arrived as.
    /// - Parameter skipping: sequences not to send (what was pulled from the receiver itself),
    ///   ascending and disjoint; the range still covers them, as it covers events its filter leaves out.
    package func exportRange(
        after: UInt64, filter: RangeFilter?, excluding: ReplicaID?, maxEvents: Int, maxBytes: Int, through last: UInt64 = .max,
        skipping: [ClosedRange<UInt64>] = []
    ) throws -> EventRange {
        try environment.read { txn in
            let head = try LogHead.read(txn, dbs)
            let start = min(after, head.sequence)
            var events: [(sequence: UInt64, event: Event)] = []
            var opaque: [OpaqueEvent] = []
            var opaqueKeyIDs: [KeyID] = []
            var bytes = 0
            var upTo = start
            var window = 0  // the first window of `skipping` not wholly before the record scanned
            func full(_ size: Int) -> Bool {
                events.count + opaque.count > 0 && (events.count + opaque.count >= maxEvents || bytes + size > maxBytes)
            }
            try txn.scan(dbs.events, from: (start + 1).bigEndianBytes) { key, value in
                guard let sequence = UInt64(bigEndianBytes: key), sequence <= last else { return false }
                // The scan is ascending, so one cursor walks the windows (no search per record).
                while window < skipping.count, skipping[window].upperBound < sequence { window += 1 }
                if window < skipping.count, skipping[window].contains(sequence) {
                    upTo = sequence
                    return true
                }
                let record = try LogRecord(decoding: value, sequence: sequence)
                switch record.kind {
                case .anchor, .chainKey, .gap:
                    break  // records of this log's own chain: nothing to send
                case .opaque:
                    guard let item = OpaqueEvent(relayRecord: record.body) else {
                        throw ChronicleError.corruptRecord(sequence: sequence, reason: "an opaque record without an identity")
                    }
                    // A second version of an identity this store holds, kept to relay, is an event
                    // this build reads: it travels as events do, by the filter and the excluded
                    // writer (the genuine event behind a copy a carrier altered must reach members
                    // in automatic mode too). Newer formats relay with every manual sync, never
                    // with automatic pushes.
                    let event = try? Event(decoding: item.bytes)
                    let admitted =
                        if let event { (filter?.admits(event) ?? true) && event.origin != excluding } else { filter == nil || filter == .syncable }
                    if admitted {
                        if full(item.bytes.count) { return false }
                        opaque.append(item)
                        bytes += item.bytes.count + 16
                        // The keys it names: a second version's seal and authenticator, as for any
                        // event; a newer-format item's trailing authenticator.
                        let named = event?.namedKeyIDs ?? Event.trailingAuthenticator(item.bytes).map { [$0.0] } ?? []
                        for id in named where !opaqueKeyIDs.contains(id) { opaqueKeyIDs.append(id) }
                    }
                case .event:
                    let event = try record.event(sequence: sequence)
                    if filter?.admits(event) ?? true, event.origin != excluding {
                        if full(event.payload.count) { return false }
                        events.append((sequence, event))
                        bytes += event.payload.count + 64
                    }
                }
                upTo = sequence
                return true
            }
            // What is current of what the range covers: revisions a receiver would drop at once stay here.
            let sent = try currentEvents(events, automatic: filter.map { if case .automaticSmall = $0 { true } else { false } } ?? false, txn)
            var keyIDs: [KeyID] = []
            for event in sent {
                if event.sealed, let envelope = try? Envelope(decoding: event.payload), !keyIDs.contains(envelope.keyID) {
                    keyIDs.append(envelope.keyID)
                }
                if let id = event.authenticator?.keyID, !keyIDs.contains(id) { keyIDs.append(id) }
            }
            for id in opaqueKeyIDs where !keyIDs.contains(id) { keyIDs.append(id) }
            // Each key as it travels, and any alternate records this store relays under its id.
            let keys = try travelingKeyRecords(keyIDs, txn)
            var range = EventRange(
                source: replica, epoch: try Self.epoch(txn, dbs), after: start, upTo: upTo, head: head.sequence,
                afterChain: try chainHash(at: start, txn), upToChain: try chainHash(at: upTo, txn), keys: keys, events: sent, opaque: opaque)
            range.opaqueKeys = try keyIDs.flatMap { id in try keyRecords.newerKindKeys(id, txn) }
            return range
        }
    }

    /// The key records a range carries for `keyIDs`: each key as it travels, and any alternate
    /// records this store relays under its id.
    func travelingKeyRecords(_ keyIDs: [KeyID], _ txn: borrowing Transaction) throws -> [WrappedKey] {
        try keyIDs.flatMap { id in (try keyRecords.travelKey(id, txn).map { [$0] } ?? []) + (try keyRecords.alternateKeys(id, txn)) }
    }

    /// Of the events a range covers (in log order), those worth sending. With the automatic filter,
    /// the newest (by conflict order) of each key and writer in the range: a key written many
    /// times within the push delay travels once, and `sync()`, whose checkpoints automatic pushes
    /// never move, sends the rest. Otherwise those the key's retention keeps here: a receiver
    /// with the same retention would drop the others at once, and a key kept for ever sends all.
    /// The winner of a key is always among them (retention never drops it), so receivers converge.
    func currentEvents(_ events: [(sequence: UInt64, event: Event)], automatic: Bool, _ txn: borrowing Transaction) throws -> [Event] {
        guard events.count > 1 else { return events.map(\.event) }
        if automatic {
            var newest: [[UInt8]: ConflictOrder] = [:]
            for (_, event) in events {
                let group = HistoryKey.prefix(domain: event.domain, name: event.key) + event.origin.bytes
                if newest[group].map({ event.order > $0 }) ?? true { newest[group] = event.order }
            }
            return events.compactMap { _, event in
                newest[HistoryKey.prefix(domain: event.domain, name: event.key) + event.origin.bytes] == event.order ? event : nil
            }
        }
        // Per key: `nil` when it keeps every record it has, else the sequences it keeps.
        var kept: [[UInt8]: Set<UInt64>?] = [:]
        var sent: [Event] = []
        sent.reserveCapacity(events.count)
        for (sequence, event) in events {
            let prefix = HistoryKey.prefix(domain: event.domain, name: event.key)
            if kept[prefix] == nil {
                let retention = try sweeper.retention(ofPrefix: prefix, txn)
                let sequences = retention.keptRevisions == nil ? [] : try historyIndex.historySequences(event.domain, event.key, txn)
                if let keep = retention.keptRevisions, sequences.count > keep {
                    kept[prefix] = .some(Set(try sweeper.retainedSequences(event.domain, event.key, keeping: retention, known: sequences, txn)))
                } else {
                    kept[prefix] = .some(nil)
                }
            }
            if let retained = kept[prefix] ?? nil, !retained.contains(sequence) { continue }
            sent.append(event)
        }
        return sent
    }

    /// The chain hash of the record at `sequence` (zeros for 0, or a sequence not in the log).
    package func chainHash(at sequence: UInt64, _ txn: borrowing Transaction) throws -> [UInt8] {
        guard sequence > 0, let bytes = try txn.get(dbs.events, key: sequence.bigEndianBytes), bytes.count > LogRecord.hashLength else {
            return LogHead.empty.chain
        }
        return Array(bytes.suffix(LogRecord.hashLength))
    }

    package func chainHash(at sequence: UInt64) throws -> [UInt8] {
        try environment.read { txn in try chainHash(at: sequence, txn) }
    }

    /// Ascending sequences as the fewest closed ranges.
    package static func coalesced(_ sequences: [UInt64]) -> [ClosedRange<UInt64>] {
        var ranges: [ClosedRange<UInt64>] = []
        for sequence in sequences {
            if let last = ranges.last, last.upperBound &+ 1 == sequence {
                ranges[ranges.count - 1] = last.lowerBound...sequence
            } else if ranges.last?.contains(sequence) != true {
                ranges.append(sequence...sequence)
            }
        }
        return ranges
    }
}
