package import ChronicleFormat
import ChronicleLMDB
import ChronicleSodium
import Foundation

/// Checks the log, its head and its views without changing anything (`chronicle verify`, `Store.verify()`).
package struct Verification: Sendable {
    /// How it reads the log: its replay, over the log's storage, drift guard and chain keys.
    let replayer: LogReplay
    /// This replica: its own events are checked against its writer's counters.
    let replica: ReplicaID

    private var environment: Environment { replayer.storage.environment }
    private var dbs: Databases { replayer.storage.dbs }
    private var driftGuard: DriftGuard { replayer.driftGuard }
    private var chainKeys: ChainKeys { replayer.chainKeys }
}

extension EventLog {
    package var verification: Verification { Verification(replayer: replayer, replica: replica) }
}

extension Verification {
    /// Checks what `meta` says of the log against the log itself: a store with a data key of
    /// its own has a keyed chain, and a keyed head carries a MAC that only the key makes.
    private func verifyHead(_ txn: borrowing Transaction, _ replay: LogReplay.Replay) throws {
        let head = try LogHead.read(txn, dbs)
        guard replay.covered == head.sequence else {
            throw ChronicleError.corruptMeta(entry: "seq", reason: "the head says \(head.sequence) records, the log holds \(replay.covered)")
        }
        // The head's chain hash must be the log's own: a head MAC over another chain (an old head
        // put back over a log cut or rewritten since) says nothing about this log.
        guard head.chain == replay.chain else {
            throw ChronicleError.corruptMeta(entry: "chain", reason: "the head's chain hash is not that of the log's last record")
        }
        let keyed = replay.keyed
        if keyed, head.chainKeyID == nil {
            // The head MAC would go unchecked: meta was edited to forget the log's chain key.
            throw ChronicleError.corruptMeta(entry: "chain.key", reason: "the log's chain is keyed but meta names no chain key: meta was edited")
        }
        if try txn.get(dbs.meta, key: MetaKey.activeKey) != nil, !keyed {
            throw ChronicleError.corruptMeta(
                entry: "chain.key", reason: "this store has a data key but its hash chain is not keyed: the chain was downgraded or rewritten")
        }
        guard keyed else { return }
        try head.checkMAC(txn, dbs, keys: chainKeys)
    }

    /// Whether the event at `sequence` is held back by the drift guard (indexed, not in its view),
    /// taking its row out of `rows`. The row must hold the event's own clock reading, and with
    /// `now`, one whose time came 10 minutes ago would have been promoted by an opening: a forged
    /// row that hides the key's newest event.
    private static func isHeldBack(_ event: Event, at sequence: UInt64, rows: inout [UInt64: UInt64], now: UInt64?) throws -> Bool {
        guard let row = rows.removeValue(forKey: sequence) else { return false }
        if row != event.hlc.rawValue || now.map({ event.hlc.milliseconds &+ 600_000 < $0 }) == true {
            throw ChronicleError.corruptRecord(
                sequence: sequence,
                reason: "held back by the drift guard, but its deferred row does not match it or its time came long ago: "
                    + "the row was edited to hide the event from the views")
        }
        return true
    }

    /// An order-independent fingerprint of (identity, sequence) pairs, seeded at random per process.
    struct DotsFingerprint {
        private(set) var sum: UInt64 = 0
        private(set) var count = 0

        /// Adds a `dots` row: its key (an event's dot, 24 bytes) and the sequence it names.
        mutating func add(_ dot: UnsafeRawBufferPointer, _ sequence: UInt64) {
            var hasher = Hasher()
            hasher.combine(bytes: dot)
            hasher.combine(sequence)
            sum &+= UInt64(bitPattern: Int64(hasher.finalize()))
            count += 1
        }

        /// Adds an event's identity at `sequence`, hashed as its `dots` row would be, its dot
        /// built on the stack (no array per event).
        mutating func add(_ event: Event, _ sequence: UInt64) {
            withUnsafeTemporaryAllocation(byteCount: 24, alignment: 8) { dot in
                event.origin.bytes.withUnsafeBytes { dot.copyMemory(from: $0) }
                dot.storeBytes(of: event.counter.bigEndian, toByteOffset: 16, as: UInt64.self)
                add(UnsafeRawBufferPointer(dot), sequence)
            }
        }
    }

    /// The `dots` table is not covered by the chain: every identity row of a kept event must name
    /// that event's sequence, and no other may name one (a row added without the key makes an
    /// import drop a genuine event as a duplicate). One pass over the rows; on a mismatch, a
    /// second finds the first bad row. Rows of value 0 (identities a format-1 compaction dropped)
    /// and the compacted ranges cannot be checked against the log (docs/LIMITS.md).
    private func checkDots(against events: DotsFingerprint, _ txn: borrowing Transaction) throws {
        var rows = DotsFingerprint()
        try txn.scanInPlace(dbs.dots) { key, value in
            guard key.count == 24, value.count == 8 else { return true }
            let sequence = UInt64(bigEndian: value.loadUnaligned(as: UInt64.self))
            if sequence != 0 { rows.add(key, sequence) }
            return true
        }
        guard rows.sum != events.sum || rows.count != events.count else { return }
        var bad: (sequence: UInt64, reason: String)?
        try txn.scan(dbs.dots) { key, value in
            guard key.count == 24, let sequence = UInt64(bigEndianBytes: value), sequence != 0 else { return true }
            let holds = try txn.get(dbs.events, key: sequence.bigEndianBytes)
                .flatMap { bytes in try? LogRecord(decoding: bytes, sequence: sequence) }
                .flatMap { record in record.kind == .event ? try? record.event(sequence: sequence) : nil }
            if holds?.dot != key {
                bad = (sequence, "the dots row of identity \(EventIdentity(dot: key).map { "\($0)" } ?? "?") names this sequence, which holds no event of that identity: the row was added or edited")
                return false
            }
            return true
        }
        let (sequence, reason) = bad ?? (0, "the dots table lacks a row of an event the log holds: it was edited")
        throw ChronicleError.corruptRecord(sequence: sequence, reason: reason)
    }

    /// Checks the log and the views without changing anything.
    ///
    /// With a `verifier` (the store's keyring), every authenticator under a key it holds must
    /// verify, and no event this replica sealed or authenticated may sit in an unkeyed stretch of
    /// the chain (it was written while the store held a key: the chain was rewritten without it).
    ///
    /// A `deferred` row must name an event with that event's own clock reading, still ahead of
    /// local time (an opening promotes those whose time came; `heldBackMustBeAhead` false for a
    /// salvage's snapshot, which promotes nothing): otherwise it hides the event from the views.
    package func verify(
        progress: (@Sendable (UInt64, UInt64) -> Void)? = nil, verifier: (any EventVerifier)? = nil, heldBackMustBeAhead: Bool = true
    ) throws -> VerificationReport {
        try environment.read { txn in
            let total = try LogHead.read(txn, dbs).sequence
            var report = VerificationReport(records: 0, keys: 0)
            var replayed: [[KeyName: ReplayedKey]] = [[:], [:]]  // by Domain.rawValue
            var links: [(sequence: UInt64, before: UInt64)] = []  // what `previous` must hold, in order
            let now = UnixMilliseconds.now()
            do {
                var waiting = try driftGuard.waitingRows(txn)
                // The `dots` rows of the log's events, as a fingerprint over (identity, sequence)
                // seeded at random for this run (so no edit can be made to match it).
                var eventDots = DotsFingerprint()
                var ownAuthenticated: [UInt64] = []
                var ownSealed: [UInt64] = []
                var authenticating = Set<ReplicaID>()  // replicas seen writing authenticated events
                let replay = try replayer.replayLog(txn) { sequence, event in
                    if let progress, sequence % 4096 == 0 { progress(sequence, total) }
                    eventDots.add(event, sequence)
                    if let verifier {
                        // A member authenticates every event it writes: once a replica's events carry
                        // authenticators, a later one without is a stripped one.
                        if event.authenticator != nil {
                            authenticating.insert(event.replica)
                        } else if verifier.isMember, authenticating.contains(event.replica) {
                            throw ChronicleError.corruptRecord(
                                sequence: sequence,
                                reason: "replica \(event.replica.short) authenticated its earlier events, but this one carries no authenticator: it was stripped")
                        }
                        if let id = event.authenticator?.keyID, verifier.holdsKey(id), let problem = verifier.verify(event) {
                            throw ChronicleError.corruptRecord(sequence: sequence, reason: problem)
                        }
                        if event.replica == replica {
                            if event.authenticator.map({ verifier.holdsKey($0.keyID) }) == true { ownAuthenticated.append(sequence) }
                            if event.sealed, (try? Envelope(decoding: event.payload)).map({ verifier.holdsKey($0.keyID) }) == true {
                                ownSealed.append(sequence)
                            }
                        }
                    }
                    let heldBack = try Self.isHeldBack(event, at: sequence, rows: &waiting, now: heldBackMustBeAhead ? now : nil)
                    if let before = replayed[Int(event.domain.rawValue)][KeyName(event.key), default: ReplayedKey()].apply(
                        event, sequence: sequence, heldBack: heldBack)
                    {
                        links.append((sequence, before))
                    }
                }
                if let orphan = waiting.keys.min() {
                    throw ChronicleError.corruptRecord(sequence: orphan, reason: "a drift-guard row (deferred) names no event of the log")
                }
                report.records = replay.records
                // A member's chain is keyed before its first authenticated event; a store that seals
                // has its chain keyed when it opens (stores of format 1 included, from then on).
                let keyedFrom = replay.keyedFrom ?? .max
                if let first = ownAuthenticated.first(where: { $0 < keyedFrom }) ?? (replay.keyedFrom == nil ? ownSealed.first : nil) {
                    throw ChronicleError.corruptRecord(
                        sequence: first,
                        reason: "this replica sealed or authenticated it with a key, but the chain is not keyed there: the log was re-chained without the key")
                }
                try verifyHead(txn, replay)
                try checkDots(against: eventDots, txn)
            } catch ChronicleError.keyUnavailable(let reason) {
                // Not a finding about the log: the check could not run (a keyed log without its key).
                throw ChronicleError.keyUnavailable(reason: reason)
            } catch let error as ChronicleError {
                report.firstProblem = error
                if case let .corruptRecord(sequence, _) = error { report.firstBadSequence = sequence }
                return report
            }
            let views = try checkViews(txn, replayed: replayed)
            report.keys = views.keys
            if let problem = views.problem {
                report.firstProblem = problem
                return report
            }
            report.firstProblem = try checkHistoryIndex(txn, replayed: replayed, links: links)
            return report
        }
    }
}

extension Verification {
    /// What is wrong with the views, against a replay of the log (`nil`: nothing), and how many
    /// keys they hold.
    fileprivate func checkViews(_ txn: borrowing Transaction, replayed: [[KeyName: ReplayedKey]]) throws -> (problem: ChronicleError?, keys: Int) {
        var keys = 0
        for domain in Domain.allCases {
            var problem: ChronicleError?
            var stored: [KeyName: ViewEntry] = [:]
            try txn.scan(dbs.view(domain)) { key, value in
                let name = String(decoding: key, as: UTF8.self)
                guard let entry = try? ViewEntry(decoding: value) else {
                    problem = .corruptViewEntry(key: name, reason: "the \(domain.name) view entry does not decode")
                    return false
                }
                stored[KeyName(name)] = entry
                return true
            }
            if let problem { return (problem, keys) }
            let expected = replayed[Int(domain.rawValue)].compactMapValues(\.winner)
            if stored != expected {
                let differing = Set(stored.keys).union(expected.keys).map(\.name).sorted().first {
                    stored[KeyName($0)] != expected[KeyName($0)]
                } ?? "?"
                let sequence = expected[KeyName(differing)]?.sequence ?? stored[KeyName(differing)]?.sequence ?? 0
                return (.corruptRecord(sequence: sequence, reason: "the \(domain.name) view differs from a replay of the log at key \"\(differing)\""), keys)
            }
            keys += stored.count
        }
        return (nil, keys)
    }

    /// What is wrong with the history index, against a replay of the log (`nil`: nothing).
    /// Not checked while `history` holds rows: the index then waits for its rebuild, and reads
    /// do not use it.
    fileprivate func checkHistoryIndex(
        _ txn: borrowing Transaction, replayed: [[KeyName: ReplayedKey]], links: [(sequence: UInt64, before: UInt64)]
    ) throws -> ChronicleError? {
        guard try txn.count(dbs.legacyHistory) == 0 else { return nil }
        func problem(_ sequence: UInt64, _ reason: String) throws -> ChronicleError {
            let name = try txn.get(dbs.events, key: sequence.bigEndianBytes).flatMap { bytes in
                try? LogRecord(decoding: bytes, sequence: sequence).event(sequence: sequence).key
            }
            return .corruptViewEntry(key: name ?? "?", reason: "the history index \(reason)")
        }
        var index = 0
        var found: ChronicleError?
        // Read in place: a row's bytes are compared, never copied (one link a record).
        func bigEndian(_ bytes: UnsafeRawBufferPointer) -> UInt64? { bytes.count == 8 ? UInt64(bigEndian: bytes.loadUnaligned(as: UInt64.self)) : nil }
        try txn.scanInPlace(dbs.previous) { key, value in
            let sequence = bigEndian(key) ?? 0
            guard index < links.count, sequence == links[index].sequence else {
                if index < links.count, links[index].sequence < sequence {
                    found = try problem(links[index].sequence, "has no link for record \(links[index].sequence)")
                } else {
                    found = try problem(sequence, "links record \(sequence), which is its key's first or not an event")
                }
                return false
            }
            guard bigEndian(value) == links[index].before else {
                found = try problem(sequence, "links record \(sequence) to another record than its key's one before it (\(links[index].before))")
                return false
            }
            index += 1
            return true
        }
        if let found { return found }
        if index < links.count { return try problem(links[index].sequence, "has no link for record \(links[index].sequence)") }
        var expected: [[UInt8]: UInt64] = [:]
        for domain in Domain.allCases {
            for (name, key) in replayed[Int(domain.rawValue)] { expected[HistoryKey.prefix(domain: domain, name: name.name)] = key.last }
        }
        var count = 0
        try txn.scan(dbs.latest) { key, value in
            count += 1
            guard let sequence = expected[key], UInt64(bigEndianBytes: value) == sequence else {
                let name = String(decoding: key.dropFirst(2), as: UTF8.self)
                found = .corruptViewEntry(key: name, reason: "the history index names another record than the key's latest in the log")
                return false
            }
            return true
        }
        if let found { return found }
        if count != expected.count { return .corruptViewEntry(key: "?", reason: "the history index misses the latest record of \(expected.count - count) key(s)") }
        return nil
    }
}
