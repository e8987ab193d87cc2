package import ChronicleFormat
package import ChronicleLMDB
import ChronicleSodium
import Foundation

extension EventLog {
    /// What a replay found besides the events it visited.
    package struct Replay {
        /// Records read (gap records aside).
        package var records = 0
        /// Sequences the log covers: its records and the runs its gaps stand for.
        package var covered: UInt64 = 0
        /// Whether the chain was keyed at the end of the log.
        package var keyed = false
        /// The first sequence the chain is keyed at, if it is.
        package var keyedFrom: UInt64?
        /// The chain hash of the last record read (zeros for an empty log).
        package var chain: [UInt8] = LogRecord.noChain
    }

    /// Visits every log record in order, checking the hash chain and decoding
    /// each event. Throws at the first bad record, naming its sequence.
    ///
    /// The chain is unkeyed until a chain-key record, and keyed (with that record's key) from
    /// it on; a store keyed by format 1 (`chain.key` in `meta`, no `chain.inlog`) is keyed from
    /// its first record.
    @discardableResult
    package func replayLog(
        _ txn: borrowing Transaction, upTo limit: UInt64 = .max, opaque visitOpaque: ((UInt64, OpaqueEvent) throws -> Void)? = nil,
        _ visit: (UInt64, Event) throws -> Void
    ) throws -> Replay {
        // The chain hash of the record before, and this record's: two buffers swapped per record.
        var previous = LogHead.empty.chain
        var hash = [UInt8](repeating: 0, count: LogRecord.hashLength)
        let legacy = try txn.get(dbs.meta, key: MetaKey.chainInLog) == nil
        var hashKey = legacy ? try chainKeys.key(try LogHead.read(txn, dbs).chainKeyID) : nil
        var keyedFrom: UInt64? = hashKey == nil ? nil : 1
        var expected: UInt64 = 1
        var count = 0
        // The key of gap MACs: that of the log's first chain-key record (the log's own word, not
        // `meta`'s), or none when the log has none; looked up at the first gap.
        var gapKey: KeyedHash??
        var firstChainKey: KeyedHash? = hashKey  // a store keyed by format 1: meta's, from record 1
        try txn.scanInPlace(dbs.events) { key, value in
            guard key.count == 8 else {
                throw ChronicleError.corruptRecord(sequence: expected, reason: "log key of \(key.count) bytes")
            }
            let sequence = UInt64(bigEndian: key.loadUnaligned(as: UInt64.self))
            guard sequence <= limit else { return false }
            // Split in place: kind ‖ body ‖ hash, reading the record straight from the map.
            guard value.count > 1 + LogRecord.hashLength, let kind = RecordKind(rawValue: value[0]) else {
                throw ChronicleError.corruptRecord(sequence: sequence, reason: "record of \(value.count) bytes has no known kind")
            }
            let body = UnsafeRawBufferPointer(rebasing: value[1..<(value.count - LogRecord.hashLength)])
            if kind == .gap {
                // A run of dropped records: it must start where the log is, follow the chain, and
                // carry a MAC only the chain key makes (or, unkeyed, a checksum).
                let stored = Array(UnsafeRawBufferPointer(rebasing: value[(value.count - LogRecord.hashLength)...]))
                let gap: Gap
                do { gap = try Gap(decoding: Array(body)) } catch {
                    throw ChronicleError.corruptRecord(sequence: sequence, reason: "gap: \(error)")
                }
                guard gap.first == expected, gap.first <= sequence else {
                    throw ChronicleError.corruptRecord(
                        sequence: expected, reason: "a gap over \(gap.first)...\(sequence) where the log is at \(expected)")
                }
                guard gap.chainBefore == previous else {
                    throw ChronicleError.corruptRecord(sequence: sequence, reason: "hash chain broken (a gap that does not follow the record before it)")
                }
                if gapKey == nil { gapKey = .some(try firstChainKey ?? self.firstChainKey(after: sequence, txn)) }
                let mac = Gap.mac(key: gapKey ?? nil, first: gap.first, last: sequence, chainBefore: gap.chainBefore, chainAtLast: stored)
                guard Sodium.constantTimeEqual(mac, gap.mac) else {
                    throw ChronicleError.corruptRecord(
                        sequence: sequence, reason: "a gap whose MAC does not verify (records were removed or a gap edited without the key)")
                }
                previous = stored
                expected = sequence + 1
                return true
            }
            guard sequence == expected else {
                throw ChronicleError.corruptRecord(sequence: expected, reason: "missing from the log (next present: \(sequence))")
            }
            if kind == .chainKey {
                // From this record on the chain is keyed (the record itself included).
                guard let id = KeyID(bytes: body) else {
                    throw ChronicleError.corruptRecord(sequence: sequence, reason: "a chain-key record of \(body.count) bytes")
                }
                hashKey = try chainKeys.key(id)
                keyedFrom = keyedFrom ?? sequence
                firstChainKey = firstChainKey ?? hashKey
            }
            previous.withUnsafeBytes { previous in
                hash.withUnsafeMutableBytes { hash in
                    LogRecord.chainHash(previous: previous, sequence: sequence, kind: kind, body: body, key: hashKey, into: hash)
                }
            }
            // Integrity of local data, not a secret: a plain comparison is enough (memcmp: this runs
            // once per record of every replay and verify).
            let stored = UnsafeRawBufferPointer(rebasing: value[(value.count - LogRecord.hashLength)...])
            guard hash.count == stored.count, let storedBase = stored.baseAddress,
                hash.withUnsafeBytes({ $0.baseAddress.map { memcmp($0, storedBase, stored.count) == 0 } ?? false })
            else {
                throw ChronicleError.corruptRecord(sequence: sequence, reason: "hash chain broken (the record or one before it was altered)")
            }
            swap(&previous, &hash)
            if kind == .anchor {
                guard sequence == 1 else { throw ChronicleError.corruptRecord(sequence: sequence, reason: "an anchor record after the start of the log") }
                do { _ = try Anchor(decoding: Array(body)) } catch {
                    throw ChronicleError.corruptRecord(sequence: sequence, reason: "anchor: \(error)")
                }
            } else if kind == .event {
                switch Event.parse(body) {
                case let .success(.event(event)): try visit(sequence, event)
                case let .success(.opaque(opaque)): throw ChronicleError.corruptRecord(sequence: sequence, reason: opaque.reason)
                case let .failure(error): throw ChronicleError.corruptRecord(sequence: sequence, reason: error.description)
                }
            } else if kind == .opaque {
                // Kept as received, never applied; it must still carry an identity.
                guard let item = OpaqueEvent(relayRecord: body) else {
                    throw ChronicleError.corruptRecord(sequence: sequence, reason: "an opaque record without an identity")
                }
                try visitOpaque?(sequence, item)
            }
            expected += 1
            count += 1
            return true
        }
        return Replay(records: count, covered: expected - 1, keyed: hashKey != nil, keyedFrom: keyedFrom, chain: previous)
    }

    /// The key of the first chain-key record after `sequence`, or `nil` when the log has none
    /// there (an unkeyed log): what gaps before it are MAC'd with.
    func firstChainKey(after sequence: UInt64, _ txn: borrowing Transaction) throws -> KeyedHash? {
        var id: KeyID?
        try txn.scanInPlace(dbs.events, from: (sequence + 1).bigEndianBytes) { _, value in
            guard value.first == RecordKind.chainKey.rawValue else { return true }
            id = KeyID(bytes: UnsafeRawBufferPointer(rebasing: value[1..<(value.count - LogRecord.hashLength)]))
            return false
        }
        return try chainKeys.key(id)
    }

    /// Whether the log holds a chain-key record.
    func holdsChainKeyRecord(_ txn: borrowing Transaction) throws -> Bool {
        var found = false
        try txn.scanInPlace(dbs.events) { _, value in
            found = value.first == RecordKind.chainKey.rawValue
            return !found
        }
        return found
    }

    /// Drops the views and the history index and rebuilds them from the log, in one transaction.
    /// Events stamped beyond the drift guard wait outside the views, as on import.
    /// On any bad record nothing changes.
    ///
    /// The winners and index keys are gathered in memory during one pass over
    /// the log, then written in key order with `MDB_APPEND`, so a replay costs
    /// one sequential read of the log and sequential writes of the indexes.
    package func rebuildViews() throws {
        let limit = UnixMilliseconds.adding(driftMilliseconds, to: UnixMilliseconds.now())
        try environment.write { txn in
            // One dictionary lookup per event: its key's winner and last record. The history
            // index is rebuilt in the same pass (`previous` rows in sequence order, as the log is read).
            var keys: [[KeyName: ReplayedKey]] = [[:], [:]]  // by Domain.rawValue
            var waiting: [[UInt8]] = []
            var latest = try LogHead.read(txn, dbs).hlc
            for database in [dbs.defaults, dbs.secrets, dbs.deferred] { try txn.clear(database) }
            try clearHistory(txn)
            _ = try replayLog(txn) { sequence, event in
                let held = event.hlc.milliseconds > limit
                if !held { latest = max(latest, event.hlc) }  // in the views: the clock moves past it
                let before = keys[Int(event.domain.rawValue)][KeyName(event.key), default: ReplayedKey()].apply(
                    event, sequence: sequence, heldBack: held)
                if let before { try txn.put(dbs.previous, key: sequence.bigEndianBytes, value: before.bigEndianBytes, flags: .append) }
                if held { waiting.append(event.hlc.rawValue.bigEndianBytes + sequence.bigEndianBytes) }
            }
            var heads: [(key: [UInt8], sequence: UInt64)] = []
            for domain in Domain.allCases {
                let replayed = keys[Int(domain.rawValue)]
                heads += replayed.map { (HistoryKey.prefix(domain: domain, name: $0.key.name), $0.value.last) }
                let winners = replayed.compactMap { name, key in key.winner.map { (Array(name.name.utf8), $0) } }
                for (key, winner) in winners.sorted(by: { $0.0.lexicographicallyPrecedes($1.0) }) {
                    try txn.put(dbs.view(domain), key: key, value: winner.encoded(), flags: .append)
                }
            }
            try writeLatest(heads, txn)
            waiting.sort { $0.lexicographicallyPrecedes($1) }
            for key in waiting { try txn.put(dbs.deferred, key: key, value: [], flags: .append) }
            try txn.put(dbs.meta, key: MetaKey.hlc, value: latest.rawValue.bigEndianBytes)
        }
        observers.publishReset()
    }

    /// Checks what `meta` says of the log against the log itself: a store with a data key of
    /// its own has a keyed chain, and a keyed head carries a MAC that only the key makes.
    private func verifyHead(_ txn: borrowing Transaction, _ replay: Replay) throws {
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
        try checkHeadMAC(head, txn)
    }

    /// Checks a keyed head's MAC (nothing for an unkeyed head): `verify` runs it, and so does
    /// every write before it writes a new MAC, so an edited head is refused, never re-signed.
    /// - Throws: `.corruptMeta("head.mac", …)` when the MAC is missing or does not verify;
    ///   `.keyUnavailable` when the chain key is not at hand.
    package func checkHeadMAC(_ head: LogHead, _ txn: borrowing Transaction) throws {
        guard let key = try chainKeys.key(head.chainKeyID) else { return }
        guard let stored = try txn.get(dbs.meta, key: MetaKey.headMAC) else {
            // Stores keyed by format 1 get their head MAC with their next write.
            if try txn.get(dbs.meta, key: MetaKey.chainInLog) == nil { return }
            throw ChronicleError.corruptMeta(entry: "head.mac", reason: "the head of a keyed log has no MAC")
        }
        if Sodium.constantTimeEqual(stored, try head.mac(txn, dbs, key: key)) { return }
        // A copy that has not written yet: its MAC covers the epoch before the copy.
        if let covered = try txn.get(dbs.meta, key: MetaKey.macEpoch), Sodium.constantTimeEqual(stored, head.mac(epoch: covered, key: key)) {
            return
        }
        throw ChronicleError.corruptMeta(entry: "head.mac", reason: "the head's MAC does not verify: meta was edited")
    }

    /// Checks the log and the views without changing anything.
    ///
    /// With a `verifier` (the store's keyring), every authenticator under a key it holds must
    /// verify, and no event this replica sealed or authenticated may sit in an unkeyed stretch of
    /// the chain (it was written while the store held a key: the chain was rewritten without it).
    package func verify(progress: (@Sendable (UInt64, UInt64) -> Void)? = nil, verifier: (any EventVerifier)? = nil) throws -> VerificationReport {
        try environment.read { txn in
            let total = try LogHead.read(txn, dbs).sequence
            var report = VerificationReport(records: 0, keys: 0)
            var replayed: [[KeyName: ReplayedKey]] = [[:], [:]]  // by Domain.rawValue
            var links: [(sequence: UInt64, before: UInt64)] = []  // what `previous` must hold, in order
            var waiting = Set<UInt64>()
            try txn.scan(dbs.deferred) { key, _ in
                if let sequence = UInt64(bigEndianBytes: Array(key.suffix(8))) { waiting.insert(sequence) }
                return true
            }
            do {
                var ownAuthenticated: [UInt64] = []
                var ownSealed: [UInt64] = []
                var authenticating = Set<ReplicaID>()  // replicas seen writing authenticated events
                let replay = try replayLog(txn) { sequence, event in
                    if let progress, sequence % 4096 == 0 { progress(sequence, total) }
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
                    let held = waiting.contains(sequence)  // held back by the drift guard: indexed, not in the view
                    if let before = replayed[Int(event.domain.rawValue)][KeyName(event.key), default: ReplayedKey()].apply(
                        event, sequence: sequence, heldBack: held)
                    {
                        links.append((sequence, before))
                    }
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
            } catch ChronicleError.keyUnavailable(let reason) {
                // Not a finding about the log: the check could not run (a keyed log without its key).
                throw ChronicleError.keyUnavailable(reason: reason)
            } catch let error as ChronicleError {
                report.firstProblem = error
                if case let .corruptRecord(sequence, _) = error { report.firstBadSequence = sequence }
                return report
            }
            for domain in Domain.allCases {
                var stored: [KeyName: ViewEntry] = [:]
                try txn.scan(dbs.view(domain)) { key, value in
                    let name = String(decoding: key, as: UTF8.self)
                    guard let entry = try? ViewEntry(decoding: value) else {
                        report.firstProblem = .corruptViewEntry(key: name, reason: "the \(domain.name) view entry does not decode")
                        return false
                    }
                    stored[KeyName(name)] = entry
                    return true
                }
                if report.firstProblem != nil { return report }
                let expected = replayed[Int(domain.rawValue)].compactMapValues(\.winner)
                if stored != expected {
                    let differing = Set(stored.keys).union(expected.keys).map(\.name).sorted().first {
                        stored[KeyName($0)] != expected[KeyName($0)]
                    } ?? "?"
                    report.firstProblem = .corruptRecord(
                        sequence: expected[KeyName(differing)]?.sequence ?? stored[KeyName(differing)]?.sequence ?? 0,
                        reason: "the \(domain.name) view differs from a replay of the log at key \"\(differing)\"")
                    return report
                }
                report.keys += stored.count
            }
            report.firstProblem = try checkHistoryIndex(txn, replayed: replayed, links: links)
            return report
        }
    }
}

extension EventLog {
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
        try txn.scan(dbs.previous) { key, value in
            let sequence = UInt64(bigEndianBytes: key) ?? 0
            guard index < links.count, sequence == links[index].sequence else {
                if index < links.count, links[index].sequence < sequence {
                    found = try problem(links[index].sequence, "has no link for record \(links[index].sequence)")
                } else {
                    found = try problem(sequence, "links record \(sequence), which is its key's first or not an event")
                }
                return false
            }
            guard UInt64(bigEndianBytes: value) == links[index].before else {
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

/// What a replay keeps of a key: its last record and its current winner.
package struct ReplayedKey {
    package var last: UInt64 = 0
    package var winner: ViewEntry?

    /// Takes the record at `sequence`; returns the key's record before it (`nil` for its first).
    package mutating func apply(_ event: Event, sequence: UInt64, heldBack: Bool) -> UInt64? {
        let before = last == 0 ? nil : last
        last = sequence
        guard !heldBack else { return before }
        if let winner, !event.wins(over: winner.order) { return before }
        winner = ViewEntry(event: event, sequence: sequence)
        return before
    }
}
