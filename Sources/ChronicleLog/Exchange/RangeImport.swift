package import ChronicleFormat
import ChronicleLMDB

/// What an import is asked to enforce, the same for every item of a range.
struct ImportOptions {
    /// Checks that a member of the sync group authenticated each event (`nil`: a store that
    /// verifies nothing, which keeps what it cannot judge to relay).
    var verifier: (any EventVerifier)?
    var requireSealedDefaults: Bool
    /// Whether relay-only records count against the bounds on what a store keeps to relay.
    var boundRelayOnly: Bool
}

/// One import's progress inside its write transaction: what it counted and committed, which of
/// the sequences it took came from the range, and the room it read. A write may run its body
/// twice (after growing the map), so each run starts afresh.
struct ImportRun {
    let source: String
    let now: UInt64
    var receipt = RangeReceipt()
    var committed: [CommittedEvent] = []
    /// Sequences taken by the range's own items (not by items let out of the quarantine).
    var fromRange: [UInt64] = []
    /// The quarantine's room, read when the first item is set aside.
    var space: QuarantineSpace?
    /// The room for relay-only records, in total and for `source`, read when first needed.
    var relaySpace: (total: QuarantineSpace, source: QuarantineSpace)?
}

/// The items an import looks at: the range's, then those let out of the quarantine because the
/// range brought the key they waited for (released only when they verify).
struct ImportCandidates {
    var events: [Event]
    var encodings: [[UInt8]?]
    /// A verdict per event when a verifier checks them: `.some(nil)` authentic, `.some(reason)` not.
    var verdicts: [String??]
    var opaque: [OpaqueEvent]
    /// How many of `events` and of `opaque` came in the range.
    let rangeEvents: Int
    let rangeOpaque: Int

    init(_ range: EventRange, encodings: [[UInt8]?], verdicts: [String?]?) {
        events = range.events
        self.encodings = encodings
        self.verdicts = verdicts.map { $0.map { .some($0) } } ?? Array(repeating: nil, count: range.events.count)
        opaque = range.opaque
        (rangeEvents, rangeOpaque) = (range.events.count, range.opaque.count)
    }

    /// Adds items released from the quarantine, which verified as they left it.
    mutating func add(released: (events: [Event], opaque: [OpaqueEvent])) {
        events += released.events
        encodings += Array(repeating: nil, count: released.events.count)
        verdicts += Array(repeating: .some(nil), count: released.events.count)
        opaque += released.opaque
    }
}

/// Applies received ranges to the log, in named steps (see `importRangeReportingReceived`).
package struct RangeImport: Sendable {
    let log: EventLog

    private var dbs: Databases { log.dbs }
    private var observers: ObserverHub { log.observers }
    private var driftGuard: DriftGuard { log.driftGuard }
    private var keyTables: KeyTables { log.keyTables }
}

extension EventLog {
    package var rangeImport: RangeImport { RangeImport(log: self) }
}

extension RangeImport {
    /// Applies a received range in one transaction.
    ///
    /// New events are appended and indexed, known ones skipped. What fails validation or
    /// authentication is set aside in the quarantine with its reason and `source`, never
    /// applied and never relayed, and never stops the rest: the checkpoint advances in the
    /// same transaction. Events of newer formats are stored and relayed as opaque bytes.
    ///
    /// The steps, in order: the range was decoded and its key records screened before the call
    /// (no Argon2id runs inside the transaction); events are verified before the write lock;
    /// then, in the transaction, keys are taken, items waiting for them released, each event
    /// screened and then appended or set aside, opaque items likewise, and the checkpoint set.
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
        let options = ImportOptions(verifier: verifier, requireSealedDefaults: requireSealedDefaults, boundRelayOnly: boundRelayOnly)
        let received: [[UInt8]?] = range.receivedBytes.count == range.events.count ? range.receivedBytes : Array(repeating: nil, count: range.events.count)
        // Verified before the write lock is taken (verification needs no transaction), on every core.
        let verdicts = verifier?.verifyAll(range.events, encoded: received)
        var run = ImportRun(source: source, now: 0)
        let receipt = try log.withHead(.whenChanged) { txn, head in
            run = ImportRun(source: source, now: UnixMilliseconds.now())
            run.receipt.received = range.events.count + range.opaque.count
            run.committed += try driftGuard.promoteDue(txn, head: &head, now: run.now).promoted
            try takeKeys(keys, of: range, options, &run, txn)
            var candidates = ImportCandidates(range, encodings: received, verdicts: verdicts)
            if let verifier, run.receipt.keys > 0 { candidates.add(released: try log.quarantine.releaseQuarantined(verifiedBy: verifier, txn)) }
            for index in candidates.events.indices { try importEvent(index, of: candidates, options, &run, txn, &head) }
            for index in candidates.opaque.indices {
                try importOpaque(candidates.opaque[index], fromRange: index < candidates.rangeOpaque, options, &run, txn, &head)
            }
            run.receipt.quarantined = run.space?.held.count ?? 0
            if let checkpoint { try advance(checkpoint, txn) }
            return run.receipt
        }
        if !run.committed.isEmpty { observers.publish(run.committed) }
        if receipt.deferred > 0 { log.schedulePromotion(at: try log.nextPromotion()) }
        return (receipt, Self.coalesced(run.fromRange.sorted()))
    }

    /// Ascending sequences as the fewest closed ranges.
    static func coalesced(_ sequences: [UInt64]) -> [ClosedRange<UInt64>] {
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

    /// Keys: drops the quarantined key records the screening tried again, stores the accepted
    /// ones (counted in the receipt) and sets the rejected ones aside.
    private func takeKeys(_ keys: KeyScreening, of range: EventRange, _ options: ImportOptions, _ run: inout ImportRun, _ txn: borrowing Transaction) throws {
        for id in keys.retired { try txn.delete(dbs.quarantine, key: id.bigEndianBytes) }
        run.receipt.keys = try keyTables.addWrappedKeys(keys.accepted, txn)
        // A newer build's key records: a store that verifies nothing keeps them to relay; a member cannot open them.
        if options.verifier == nil { try keyTables.addNewerKindKeys(range.opaqueKeys, named: range.namedKeyIDs, txn) }
        for (record, reason, detail) in keys.rejected {
            try setAside(reason, kind: .wrappedKey, detail: detail, bytes: record.encoded(), &run, txn)
        }
    }

    /// One event: screened, then counted as a duplicate, kept unapplied to relay, set aside, or
    /// appended (held back by the drift guard when it is ahead of this device's clock).
    private func importEvent(
        _ index: Int, of candidates: ImportCandidates, _ options: ImportOptions, _ run: inout ImportRun, _ txn: borrowing Transaction,
        _ head: inout LogHead
    ) throws {
        let (event, encoded) = (candidates.events[index], candidates.encodings[index])
        let fromRange = index < candidates.rangeEvents
        if let (screening, detail) = try screen(
            event, verdict: candidates.verdicts[index], verifier: options.verifier, requireSealedDefaults: options.requireSealedDefaults, txn)
        {
            switch screening {
            case .duplicate:
                run.receipt.duplicates += 1
            case .relayOnly:
                // A store that verifies nothing cannot tell which of two events with one identity
                // is genuine: it keeps the first, and stores and relays this one unapplied, so a
                // carrier that squats an identity here cannot censor a member's real event.
                let bytes = encoded ?? event.encoded()
                let item = OpaqueEvent(origin: event.origin, counter: event.counter, bytes: bytes, reason: detail)
                guard try hasRelayRoom(for: item, options, &run, txn) else { return }
                try appendOpaque(item, fromRange: fromRange, &run, txn, &head)
            case let .reject(reason):
                try setAside(reason, detail: detail, bytes: encoded ?? event.encoded(), &run, txn)
            }
            return
        }
        let deferred = driftGuard.isAhead(event.hlc, now: run.now)
        if !deferred { head.hlc = max(head.hlc, event.hlc) }
        // The log holds the current format only: an item of version 1 is logged re-encoded (FORMAT.md 3.2).
        let (sequence, won) = try log.append(event, txn, &head, indexView: !deferred, encoded: encoded?.first == Event.formatVersion ? encoded : nil)
        if deferred {
            try driftGuard.hold(event.hlc, sequence: sequence, txn)
            run.receipt.deferred += 1
        }
        run.receipt.applied += 1
        if fromRange { run.fromRange.append(sequence) }
        run.committed.append(CommittedEvent(sequence: sequence, event: event, isWinner: won))
    }

    /// One item of a newer format: set aside when it claims what no item may, or (at a member)
    /// when no member of the group authenticated it; else kept to relay.
    private func importOpaque(
        _ item: OpaqueEvent, fromRange: Bool, _ options: ImportOptions, _ run: inout ImportRun, _ txn: borrowing Transaction,
        _ head: inout LogHead
    ) throws {
        if item.counter > Event.maxCounter || item.origin == log.writer {
            let reason: QuarantinedItem.Reason = item.counter > Event.maxCounter ? .absurdCounter : .claimsOwnIdentity
            return try setAside(reason, detail: item.reason, bytes: item.bytes, &run, txn)
        }
        if let verifier = options.verifier {
            // A member keeps (and so relays) only what a member of its group authenticated.
            if let (problem, awaiting) = verifier.verifyOpaque(item.bytes) {
                return try setAside(awaiting ? .awaitingKey : .unauthenticated, detail: problem, bytes: item.bytes, &run, txn)
            }
        } else {
            guard try hasRelayRoom(for: item, options, &run, txn) else { return }
        }
        try appendOpaque(item, fromRange: fromRange, &run, txn, &head)
    }

    /// Whether a store that verifies nothing keeps `item` to relay: one it holds already takes
    /// no room; one over the bounds is set aside (`relayLimit`) and `false` returned.
    private func hasRelayRoom(for item: OpaqueEvent, _ options: ImportOptions, _ run: inout ImportRun, _ txn: borrowing Transaction) throws -> Bool {
        guard options.boundRelayOnly, try txn.get(dbs.dots, key: EventLog.opaqueKey(item.bytes)) == nil,
            try !log.relayOnly.relayRoom(item.bytes.count, source: run.source, &run.relaySpace, txn)
        else { return true }
        try setAside(.relayLimit, detail: RelayOnlyBounds.relayLimitDetail, bytes: item.bytes, &run, txn)
        return false
    }

    /// Appends an item this store keeps unapplied (deduplicated by its bytes: it claims no
    /// identity, so a carrier's squat never stands in the way of a member's real event).
    private func appendOpaque(_ item: OpaqueEvent, fromRange: Bool, _ run: inout ImportRun, _ txn: borrowing Transaction, _ head: inout LogHead) throws {
        if try log.appendOpaque(item, txn, &head) {
            run.receipt.opaque += 1
            if fromRange { run.fromRange.append(head.sequence) }
        } else {
            run.receipt.duplicates += 1
        }
    }

    /// Sets an item aside in the quarantine, from the run's source.
    private func setAside(
        _ reason: QuarantinedItem.Reason, kind: QuarantinedItem.Kind = .event, detail: String, bytes: [UInt8], _ run: inout ImportRun,
        _ txn: borrowing Transaction
    ) throws {
        try log.quarantine.setAside(kind, reason, detail: detail, bytes: bytes, source: run.source, now: run.now, &run.space, txn)
    }

    /// The checkpoint: set in the import's transaction, and only when it changed (a range that
    /// brings nothing new then commits nothing: no head is written either, `.whenChanged`).
    private func advance(_ checkpoint: (key: CheckpointKey, value: UInt64, chain: [UInt8]), _ txn: borrowing Transaction) throws {
        let value = CheckpointValue(sequence: checkpoint.value, chain: checkpoint.chain).encoded()
        if try txn.get(dbs.peers, key: checkpoint.key.bytes) != value { try txn.put(dbs.peers, key: checkpoint.key.bytes, value: value) }
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
        guard event.payload.count <= log.maxReceivedPayload else {
            return (.reject(.tooLarge), "a payload of \(event.payload.count) bytes; this store accepts values up to \(log.maxReceivedPayload - Envelope.overhead)")
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
        if event.origin == log.writer {
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
