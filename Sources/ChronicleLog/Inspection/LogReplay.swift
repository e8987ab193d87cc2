package import ChronicleFormat
package import ChronicleLMDB
import ChronicleSodium
import Foundation

/// Reading the whole log in order, checking its chain (`replayLog`), and rebuilding the views and the history index from it.
package struct LogReplay: Sendable {
    /// What it reads and rebuilds: the log's environment and databases.
    let storage: LogStorage
    /// Who hears that the views were rebuilt.
    let observers: ObserverHub
    /// The events held back for their time, which a rebuild keeps out of the views.
    let driftGuard: DriftGuard
    /// The keys the chain is checked with.
    let chainKeys: ChainKeys

    private var environment: Environment { storage.environment }
    private var dbs: Databases { storage.dbs }
    private var historyIndex: HistoryIndex { HistoryIndex(storage: storage) }
}

extension EventLog {
    package var replayer: LogReplay { LogReplay(storage: storage, observers: observers, driftGuard: driftGuard, chainKeys: chainKeys) }
}

extension LogReplay {
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
                previous = try Self.checkGap(at: sequence, value, body, expected: expected, chainBefore: previous) {
                    // The key of gap MACs, looked up at the first gap that gets that far.
                    if gapKey == nil { gapKey = .some(try firstChainKey ?? self.firstChainKey(after: sequence, txn)) }
                    return gapKey ?? nil
                }
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
            try Self.visitRecord(kind, at: sequence, body, visit, visitOpaque)
            expected += 1
            count += 1
            return true
        }
        return Replay(records: count, covered: expected - 1, keyed: hashKey != nil, keyedFrom: keyedFrom, chain: previous)
    }

    /// Checks a gap record (a run of dropped records ending at `sequence`): it must start where
    /// the log is, follow the chain, and carry a MAC only the chain key makes (or, unkeyed, a
    /// checksum). Returns the chain hash it stands for (that of the run's last record).
    private static func checkGap(
        at sequence: UInt64, _ value: UnsafeRawBufferPointer, _ body: UnsafeRawBufferPointer, expected: UInt64, chainBefore previous: [UInt8],
        key: () throws -> KeyedHash?
    ) throws -> [UInt8] {
        let stored = Array(UnsafeRawBufferPointer(rebasing: value[(value.count - LogRecord.hashLength)...]))
        let gap: Gap
        do { gap = try Gap(decoding: Array(body)) } catch {
            throw ChronicleError.corruptRecord(sequence: sequence, reason: "gap: \(error)")
        }
        guard gap.first == expected, gap.first <= sequence else {
            throw ChronicleError.corruptRecord(sequence: expected, reason: "a gap over \(gap.first)...\(sequence) where the log is at \(expected)")
        }
        guard gap.chainBefore == previous else {
            throw ChronicleError.corruptRecord(sequence: sequence, reason: "hash chain broken (a gap that does not follow the record before it)")
        }
        guard gap.macVerifies(key: try key(), last: sequence, chainAtLast: stored) else {
            throw ChronicleError.corruptRecord(
                sequence: sequence, reason: "a gap whose MAC does not verify (records were removed or a gap edited without the key)")
        }
        return stored
    }

    /// Decodes a chained record's body by its kind and visits it: an anchor must open the log,
    /// an event must be one this build reads, an opaque record must carry an identity.
    private static func visitRecord(
        _ kind: RecordKind, at sequence: UInt64, _ body: UnsafeRawBufferPointer, _ visit: (UInt64, Event) throws -> Void,
        _ visitOpaque: ((UInt64, OpaqueEvent) throws -> Void)?
    ) throws {
        switch kind {
        case .anchor:
            guard sequence == 1 else { throw ChronicleError.corruptRecord(sequence: sequence, reason: "an anchor record after the start of the log") }
            do { _ = try Anchor(decoding: Array(body)) } catch {
                throw ChronicleError.corruptRecord(sequence: sequence, reason: "anchor: \(error)")
            }
        case .event:
            switch Event.parse(body) {
            case let .success(.event(event)): try visit(sequence, event)
            case let .success(.opaque(opaque)): throw ChronicleError.corruptRecord(sequence: sequence, reason: opaque.reason)
            case let .failure(error): throw ChronicleError.corruptRecord(sequence: sequence, reason: error.description)
            }
        case .opaque:
            // Kept as received, never applied; it must still carry an identity.
            guard let item = OpaqueEvent(relayRecord: body) else {
                throw ChronicleError.corruptRecord(sequence: sequence, reason: "an opaque record without an identity")
            }
            try visitOpaque?(sequence, item)
        default:
            break
        }
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

    /// Drops the views and the history index and rebuilds them from the log, in one transaction.
    /// Events stamped beyond the drift guard wait outside the views, as on import.
    /// On any bad record nothing changes.
    ///
    /// The winners and index keys are gathered in memory during one pass over
    /// the log, then written in key order with `MDB_APPEND`, so a replay costs
    /// one sequential read of the log and sequential writes of the indexes.
    package func rebuildViews() throws {
        let now = UnixMilliseconds.now()
        try environment.write { txn in
            // One dictionary lookup per event: its key's winner and last record. The history
            // index is rebuilt in the same pass (`previous` rows in sequence order, as the log is read).
            var keys: [[KeyName: ReplayedKey]] = [[:], [:]]  // by Domain.rawValue
            var waiting: [[UInt8]] = []
            var latest = try LogHead.read(txn, dbs).hlc
            for database in [dbs.defaults, dbs.secrets, dbs.deferred] { try txn.clear(database) }
            try historyIndex.clearHistory(txn)
            _ = try replayLog(txn) { sequence, event in
                let held = driftGuard.isAhead(event.hlc, now: now)
                if !held { latest = max(latest, event.hlc) }  // in the views: the clock moves past it
                let before = keys[Int(event.domain.rawValue)][KeyName(event.key), default: ReplayedKey()].apply(
                    event, sequence: sequence, heldBack: held)
                if let before { try txn.put(dbs.previous, key: sequence.bigEndianBytes, value: before.bigEndianBytes, flags: .append) }
                if held { waiting.append(DriftGuard.key(event.hlc, sequence: sequence)) }
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
            try historyIndex.writeLatest(heads, txn)
            waiting.sort { $0.lexicographicallyPrecedes($1) }
            for key in waiting { try txn.put(dbs.deferred, key: key, value: [], flags: .append) }
            try txn.put(dbs.meta, key: MetaKey.hlc, value: latest.rawValue.bigEndianBytes)
        }
        observers.publishReset()
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
        // The order alone, not a copy of the entry (its payload and ids retained and released a record).
        if let current = winner?.order, !event.wins(over: current) { return before }
        winner = ViewEntry(event: event, sequence: sequence)
        return before
    }
}
