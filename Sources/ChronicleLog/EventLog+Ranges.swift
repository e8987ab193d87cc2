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
                let retention = try retention(ofPrefix: prefix, txn)
                let sequences = retention.keptRevisions == nil ? [] : try historySequences(event.domain, event.key, txn)
                if let keep = retention.keptRevisions, sequences.count > keep {
                    kept[prefix] = .some(Set(try retainedSequences(event.domain, event.key, keeping: retention, known: sequences, txn)))
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

    // MARK: - Import

    /// Applies a received range in one transaction.
    ///
    /// New events are appended and indexed, known ones skipped. What fails validation or
    /// authentication is set aside in the quarantine with its reason and `source`, never
    /// applied and never relayed, and never stops the rest: the checkpoint advances in the
    /// same transaction. Events of newer formats are stored and relayed as opaque bytes.
    /// Key records were screened before the transaction (no Argon2id runs inside it).
    ///
    /// - Returns: the receipt, and the sequences the range's own items took in this log,
    ///   ascending and coalesced: its sender holds every one of them, so a replicator need not
    ///   push them back to it. Items the import let out of the quarantine (which came from
    ///   whoever sent them before) are not among them.
    /// - Parameter boundRelayOnly: whether relay-only records count against the bounds on what
    ///   a store keeps to relay (`false` for a copy of a store's own log, which keeps them all).
    package func importRangeReportingReceived(
        _ range: EventRange, keys: KeyScreening, verifier: (any EventVerifier)?, requireSealedDefaults: Bool,
        checkpoint: (key: CheckpointKey, value: UInt64, chain: [UInt8])?, source: String, boundRelayOnly: Bool = true
    ) throws -> (receipt: RangeReceipt, received: [ClosedRange<UInt64>]) {
        var committed: [CommittedEvent] = []
        var fromRange: [UInt64] = []
        let received: [[UInt8]?] = range.receivedBytes.count == range.events.count ? range.receivedBytes : Array(repeating: nil, count: range.events.count)
        // Verified before the write lock is taken (verification needs no transaction), on every core.
        let verdicts = verifier?.verifyAll(range.events, encoded: received)
        let receipt = try withHead(.whenChanged) { txn, head in
            committed = []
            fromRange = []  // a write may run its body twice, after growing the map
            var receipt = RangeReceipt()
            receipt.received = range.events.count + range.opaque.count
            let now = UnixMilliseconds.now()
            var space: QuarantineSpace?  // read when the first item is set aside
            committed += try EventLog.promoteDeferred(txn, dbs, head: &head, now: now, driftMilliseconds: driftMilliseconds).promoted
            for id in keys.retired { try txn.delete(dbs.quarantine, key: id.bigEndianBytes) }
            receipt.keys = try keyRecords.addWrappedKeys(keys.accepted, txn)
            // A newer build's key records: a store that verifies nothing keeps them to relay; a member cannot open them.
            if verifier == nil { try keyRecords.addNewerKindKeys(range.opaqueKeys, named: range.namedKeyIDs, txn) }
            for (record, reason, detail) in keys.rejected {
                try quarantine(.wrappedKey, reason, detail: detail, bytes: record.encoded(), source: source, now: now, &space, txn)
            }
            var candidates = range.events
            var encodings = received
            // A verdict per candidate when a verifier checks them: `.some(nil)` authentic, `.some(reason)` not.
            var candidateVerdicts: [String??] = verdicts.map { $0.map { .some($0) } } ?? Array(repeating: nil, count: candidates.count)
            var opaqueItems = range.opaque
            if let verifier, receipt.keys > 0 {
                // Items set aside because their key had not arrived get another look now that it has
                // (released only when they verify).
                let released = try releaseQuarantined(verifiedBy: verifier, txn)
                candidates += released.events
                encodings += Array(repeating: nil, count: released.events.count)
                candidateVerdicts += Array(repeating: .some(nil), count: released.events.count)
                opaqueItems += released.opaque
            }
            var relaySpace: (total: QuarantineSpace, source: QuarantineSpace)?  // relay-only records, read when first needed
            for index in candidates.indices {
                let (event, encoded) = (candidates[index], encodings[index])
                if let (screening, detail) = try screen(
                    event, verdict: candidateVerdicts[index], verifier: verifier, requireSealedDefaults: requireSealedDefaults, txn)
                {
                    switch screening {
                    case .duplicate:
                        receipt.duplicates += 1
                    case .relayOnly:
                        // A store that verifies nothing cannot tell which of two events with one identity
                        // is genuine: it keeps the first, and stores and relays this one unapplied, so a
                        // carrier that squats an identity here cannot censor a member's real event.
                        let bytes = encoded ?? event.encoded()
                        let held = try txn.get(dbs.dots, key: Self.opaqueKey(bytes)) != nil  // a duplicate takes no room
                        guard try held || !boundRelayOnly || relayRoom(bytes.count, source: source, &relaySpace, txn) else {
                            try quarantine(.event, .relayLimit, detail: Self.relayLimitDetail, bytes: bytes, source: source, now: now, &space, txn)
                            continue
                        }
                        if try appendOpaque(OpaqueEvent(origin: event.origin, counter: event.counter, bytes: bytes, reason: detail), txn, &head) {
                            receipt.opaque += 1
                            if index < range.events.count { fromRange.append(head.sequence) }
                        } else {
                            receipt.duplicates += 1
                        }
                    case let .reject(reason):
                        try quarantine(.event, reason, detail: detail, bytes: encoded ?? event.encoded(), source: source, now: now, &space, txn)
                    }
                    continue
                }
                let deferred = event.hlc.milliseconds > UnixMilliseconds.adding(driftMilliseconds, to: now)
                if !deferred { head.hlc = max(head.hlc, event.hlc) }
                // The log holds the current format only: an item of version 1 is logged re-encoded (FORMAT.md 3.2).
                let (sequence, won) = try append(event, txn, &head, indexView: !deferred, encoded: encoded?.first == Event.formatVersion ? encoded : nil)
                if deferred {
                    try txn.put(dbs.deferred, key: event.hlc.rawValue.bigEndianBytes + sequence.bigEndianBytes, value: [])
                    receipt.deferred += 1
                }
                receipt.applied += 1
                if index < range.events.count { fromRange.append(sequence) }
                committed.append(CommittedEvent(sequence: sequence, event: event, isWinner: won))
            }
            for (offset, item) in opaqueItems.enumerated() {
                if item.counter > Event.maxCounter || item.origin == writer {
                    let reason: QuarantinedItem.Reason = item.counter > Event.maxCounter ? .absurdCounter : .claimsOwnIdentity
                    try quarantine(.event, reason, detail: item.reason, bytes: item.bytes, source: source, now: now, &space, txn)
                    continue
                }
                if let verifier {
                    // A member keeps (and so relays) only what a member of its group authenticated.
                    if let (problem, awaiting) = verifier.verifyOpaque(item.bytes) {
                        try quarantine(.event, awaiting ? .awaitingKey : .unauthenticated, detail: problem, bytes: item.bytes, source: source, now: now, &space, txn)
                        continue
                    }
                } else if boundRelayOnly, try txn.get(dbs.dots, key: Self.opaqueKey(item.bytes)) == nil,
                    try !relayRoom(item.bytes.count, source: source, &relaySpace, txn)
                {
                    try quarantine(.event, .relayLimit, detail: Self.relayLimitDetail, bytes: item.bytes, source: source, now: now, &space, txn)
                    continue
                }
                // An opaque event claims no identity: it is deduplicated by its bytes, so a carrier's
                // "newer format" squat can never stand in the way of a member's real event.
                if try appendOpaque(item, txn, &head) {
                    receipt.opaque += 1
                    if offset < range.opaque.count { fromRange.append(head.sequence) }
                } else {
                    receipt.duplicates += 1
                }
            }
            receipt.quarantined = space?.held.count ?? 0
            // A range that brings nothing new writes no head (`.whenChanged`), and no checkpoint
            // that did not change: the transaction then commits nothing.
            if let checkpoint {
                let value = CheckpointValue(sequence: checkpoint.value, chain: checkpoint.chain).encoded()
                if try txn.get(dbs.peers, key: checkpoint.key.bytes) != value { try txn.put(dbs.peers, key: checkpoint.key.bytes, value: value) }
            }
            return receipt
        }
        if !committed.isEmpty { observers.publish(committed) }
        if receipt.deferred > 0 { schedulePromotion(at: try nextPromotion()) }
        return (receipt, Self.coalesced(fromRange.sorted()))
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

    /// Whether `event` would become its key's current entry. Compaction and retention never drop
    /// a key's winner, and a key's winner only grows, so an event that would win cannot be one
    /// this store dropped: it is new, whatever its identity's range says. (A carrier that claimed
    /// a member's next identity under another key, and let retention drop it at a store that
    /// verifies nothing, cannot keep the member's event out.)
    private func wouldWin(_ event: Event, _ txn: borrowing Transaction) throws -> Bool {
        var current: ConflictOrder?
        try txn.withValue(dbs.view(event.domain), key: Array(event.key.utf8)) { bytes in current = ViewEntry.order(of: bytes) }
        return current.map { event.wins(over: $0) } ?? true
    }

    /// What an import does with one event: nothing (apply it), skip it, or quarantine it.
    private enum Screening: Equatable {
        case duplicate
        /// Kept and relayed, never applied (a store that verifies nothing met a second version of an identity).
        case relayOnly
        case reject(QuarantinedItem.Reason)
    }

    /// Checks one received event against this log; `nil` when it is new and may be applied.
    /// `verdict` is what `verifier` said of it (`nil` inside: authentic), when there is a verifier.
    private func screen(
        _ event: Event, verdict: String??, verifier: (any EventVerifier)?, requireSealedDefaults: Bool, _ txn: borrowing Transaction
    ) throws -> (Screening, String)? {
        guard event.counter <= Event.maxCounter else {
            return (.reject(.absurdCounter), "counter \(event.counter) is over \(Event.maxCounter)")
        }
        guard event.payload.count <= maxReceivedPayload else {
            return (.reject(.tooLarge), "a payload of \(event.payload.count) bytes; this store accepts values up to \(maxReceivedPayload - Envelope.overhead)")
        }
        if let known = try txn.get(dbs.dots, key: event.dot).flatMap({ UInt64(bigEndianBytes: $0) }) {
            guard known != 0 else { return (.duplicate, "") }  // compacted away here: known, content no longer comparable
            guard let bytes = try txn.get(dbs.events, key: known.bigEndianBytes) else {
                throw ChronicleError.corruptRecord(sequence: known, reason: "in the dots index but missing from the log")
            }
            let record = try LogRecord(decoding: bytes, sequence: known)
            if record.kind == .event, try record.event(sequence: known) == event { return (.duplicate, "") }
            let detail = "this replica holds another event as \(event.origin.short):\(event.counter) (sequence \(known))"
            guard let verifier else { return (.relayOnly, detail) }
            // A member holds only authenticated events: the newcomer is a forgery, or the group's
            // key was used to write two events under one identity.
            if let problem = verdict ?? verifier.verify(event) { return (.reject(.unauthenticated), problem) }
            return (.reject(.conflictingIdentity), detail)
        }
        if try CompactedIdentities.contains(origin: event.origin, counter: event.counter, txn, dbs), try !wouldWin(event, txn) {
            return (.duplicate, "")  // compacted away here: known, content no longer comparable
        }
        if event.origin == writer {
            return (.reject(.claimsOwnIdentity), "\(event.origin.short) is this replica's current writer, which never wrote counter \(event.counter)")
        }
        if let verifier, let problem = verdict ?? verifier.verify(event) {
            // Named a key this member does not hold (yet): it waits for the key, whole.
            if let id = event.authenticator?.keyID, !verifier.holdsKey(id) { return (.reject(.awaitingKey), problem) }
            return (.reject(.unauthenticated), problem)
        }
        if !event.sealed && (event.domain == .secrets || requireSealedDefaults) {
            return (.reject(.unsealed), event.domain == .secrets ? "an unsealed secret" : "an unsealed value; this store seals every value")
        }
        return nil
    }
}
