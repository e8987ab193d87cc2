@_spi(Wire) package import ChronicleFormat
import Foundation
import Synchronization
import Logging
import ChronicleLMDB
import ChronicleSodium

/// Ranges out of the log: what a peer asked for after a position, bounded in events and bytes, with the key records the events name.
///
/// It reads only: the log's storage, the key rows, and the rules of what each key keeps.
package struct RangeExport: Sendable {
    let storage: LogStorage
    /// The replica the ranges say they come from.
    let replica: ReplicaID
    let planner: RetentionPlanner

    private var environment: Environment { storage.environment }
    private var dbs: Databases { storage.dbs }
    private var tables: KeyTables { KeyTables(storage: storage) }
    private var historyIndex: HistoryIndex { HistoryIndex(storage: storage) }
}

extension EventLog {
    package var rangeExport: RangeExport { RangeExport(storage: storage, replica: replica, planner: retentionPlanner) }
}

extension RangeExport {
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
                source: replica, epoch: try EventLog.epoch(txn, dbs), after: start, upTo: upTo, head: head.sequence,
                afterChain: try storage.chainHash(at: start, txn), upToChain: try storage.chainHash(at: upTo, txn), keys: keys, events: sent, opaque: opaque)
            range.opaqueKeys = try keyIDs.flatMap { id in try tables.newerKindKeys(id, txn) }
            return range
        }
    }

    /// The key records a range carries for `keyIDs`: each key as it travels, and any alternate
    /// records this store relays under its id.
    func travelingKeyRecords(_ keyIDs: [KeyID], _ txn: borrowing Transaction) throws -> [WrappedKey] {
        try keyIDs.flatMap { id in (try tables.travelKey(id, txn).map { [$0] } ?? []) + (try tables.alternateKeys(id, txn)) }
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
                let retention = try planner.retention(ofPrefix: prefix, txn)
                let sequences = retention.keptRevisions == nil ? [] : try historyIndex.historySequences(event.domain, event.key, txn)
                if let keep = retention.keptRevisions, sequences.count > keep {
                    kept[prefix] = .some(Set(try planner.retainedSequences(event.domain, event.key, keeping: retention, known: sequences, txn)))
                } else {
                    kept[prefix] = .some(nil)
                }
            }
            if let retained = kept[prefix] ?? nil, !retained.contains(sequence) { continue }
            sent.append(event)
        }
        return sent
    }

    /// The events of this log with these identities, at most about `maxBytes` of payload, with
    /// the key records they name, in a range that moves no checkpoint: `after` and `upTo` are
    /// both this log's head. Each identity's version as logged comes first, then every second
    /// version a store that verifies nothing keeps to relay under it (a carrier that got its
    /// forgery logged first cannot hide the genuine event from a member asking again); an
    /// identity compacted away or never held is left out. `whole` says, for each distinct
    /// identity asked, whether every version kept of it fitted (docs/FORMAT.md 7.6).
    package func exportEvents(_ identities: [EventIdentity], maxBytes: Int) throws -> (range: EventRange, whole: [Bool]) {
        try environment.read { txn in
            let head = try LogHead.read(txn, dbs)
            let asked = EventIdentity.distinct(identities)
            let index = Dictionary(uniqueKeysWithValues: asked.enumerated().map { ($1, $0) })
            var whole = [Bool](repeating: true, count: asked.count)
            var events: [Event] = []
            var bytes = 0
            // An event that does not fit is left out and its identity marked cut; smaller ones after it may still fit.
            func take(_ event: Event, _ position: Int) {
                guard events.isEmpty || bytes + event.payload.count <= maxBytes else {
                    whole[position] = false
                    return
                }
                events.append(event)
                bytes += event.payload.count + 64
            }
            for (position, identity) in asked.enumerated() {
                guard let sequence = try txn.get(dbs.dots, key: identity.dot).flatMap({ UInt64(bigEndianBytes: $0) }), sequence != 0,
                    let value = try txn.get(dbs.events, key: sequence.bigEndianBytes)
                else { continue }
                let record = try LogRecord(decoding: value, sequence: sequence)
                guard record.kind == .event else { continue }
                take(try record.event(sequence: sequence), position)
            }
            // Second versions kept to relay are known by their bytes, not their identity: one
            // pass over them (at most the relay-only bound), only when asked for any identity.
            var sequences: [UInt64] = []
            if !asked.isEmpty {
                try txn.scanInPlace(dbs.dots, from: [0x4F]) { key, value in
                    guard key.first == 0x4F else { return false }
                    if key.count == 33, value.count == 8 { sequences.append(UInt64(bigEndian: value.loadUnaligned(as: UInt64.self))) }
                    return sequences.count < RelayOnlyBounds.relayOnlyCapacity
                }
            }
            for sequence in sequences {
                guard let value = try txn.get(dbs.events, key: sequence.bigEndianBytes),
                    let item = (try? LogRecord(decoding: value, sequence: sequence)).flatMap({ OpaqueEvent(relayRecord: $0.body) }),
                    let position = index[EventIdentity(writer: item.origin, counter: item.counter)],
                    let event = try? Event(decoding: item.bytes), !events.contains(event)
                else { continue }
                take(event, position)
            }
            var keyIDs: [KeyID] = []
            for event in events { for id in event.namedKeyIDs where !keyIDs.contains(id) { keyIDs.append(id) } }
            let keys = try travelingKeyRecords(keyIDs, txn)
            let chain = try storage.chainHash(at: head.sequence, txn)
            let range = EventRange(
                source: replica, epoch: try EventLog.epoch(txn, dbs), after: head.sequence, upTo: head.sequence, head: head.sequence,
                afterChain: chain, upToChain: chain, keys: keys, events: events, opaque: [])
            return (range, whole)
        }
    }
}
