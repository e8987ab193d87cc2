package import ChronicleFormat
package import ChronicleLMDB
package import ChronicleSodium
import Foundation
import Synchronization

/// Writing: the group commit, one write transaction with the head (`withHead`), one record
/// joining the chain (`appendRecord`), an event with its dot, history and view (`append`).
extension EventLog {
    /// Commits the changes as one transaction (grouped with concurrent callers).
    /// Returns after the commit is durable (per the store's durability mode).
    package func commit(_ changes: [PendingChange]) throws -> [CommittedEvent] {
        do {
            // Behind every change queued before by the non-throwing forms, and visible like them.
            return try commitVisibly(changes)
        } catch {
            throw mappedDiskError(error)
        }
    }

    /// `error`, said plainly when it is LMDB's report of a full disk.
    package func mappedDiskError(_ error: any Error) -> any Error {
        guard let error = error as? LMDBError, error == .noSpace || error == .ioError else { return error }
        return diskError(error)
    }

    /// Says plainly when a write failed because the disk is full (LMDB may report EIO or ENOSPC).
    private func diskError(_ error: LMDBError) -> ChronicleError {
        let free = (try? FileManager.default.attributesOfFileSystem(forPath: path)[.systemFreeSize] as? NSNumber)??.int64Value
        if error == .noSpace || (free ?? .max) < 4 << 20 {
            return .io(
                path: path,
                reason: "the disk holding the store is full (\(error.message)); nothing of this change was written — free space and retry")
        }
        return .wrap(error)
    }

    /// The id of the environment's last committed transaction (any process's): one read of the meta page.
    package var lastTransactionID: Int { environment.lastTransactionID }

    /// Whether a transaction in `(after, through]` was committed by another process (not this opening).
    package func othersCommitted(after: Int, through: Int) -> Bool { environment.othersCommitted(after: after, through: through) }

    /// Reads the current entries of `domains` and commits the changes `rewrite` makes of
    /// them, in one write transaction: no write of another thread or process lands between
    /// the read and the write (re-sealing live values after a key rotation).
    /// - Returns: the number of events written.
    @discardableResult
    package func commitRewriting(_ domains: [Domain], _ rewrite: (Domain, String, ViewEntry) throws -> PendingChange?) throws -> Int {
        let (committed, counter) = try withHead { txn, head in
            var counter = LocalCounter(last: local.writerCounter.withLock { $0 })
            try driftGuard.promoteDue(txn, head: &head, now: UnixMilliseconds.now())
            var changes: [PendingChange] = []
            for domain in domains {
                for (name, entry) in try inspection.viewEntries(domain, txn) {
                    if let change = try rewrite(domain, name, entry) { changes.append(change) }
                }
            }
            defer { Self.wipePlaintexts(changes) }  // this attempt's plaintexts, also on a throw (a retry opens them again)
            let out = try applyLocal(changes, txn, &head, &counter)
            return (out, counter.last)
        }
        local.writerCounter.withLock { $0 = max($0, counter) }
        if !committed.isEmpty { observers.publish(committed) }
        return committed.count
    }

    func commitGroup(_ groups: [[PendingChange]]) -> [Result<[CommittedEvent], any Error>] {
        // A flush's marker (an empty request) has nothing to write: a group of markers alone opens
        // no transaction (it would rewrite the head, and fail by itself on a full disk).
        if groups.allSatisfy(\.isEmpty) { return groups.map { _ in .success([]) } }
        let results: [Result<[CommittedEvent], any Error>]
        do {
            let (committed, counter, promoted) = try withHead { txn, head in
                // One counter through every group: the taken ones are looked up once a transaction.
                var counter = LocalCounter(last: local.writerCounter.withLock { $0 })
                let promoted = try driftGuard.promoteDue(txn, head: &head, now: UnixMilliseconds.now())
                var out: [[CommittedEvent]] = []
                for changes in groups { out.append(try applyLocal(changes, txn, &head, &counter)) }
                return (out, counter.last, promoted)
            }
            local.writerCounter.withLock { $0 = max($0, counter) }
            if !promoted.promoted.isEmpty {
                observers.publish(promoted.promoted)
                schedulePromotion(at: promoted.nextDue)
            }
            results = committed.map { .success($0) }
        } catch where groups.count > 1 {
            // One request failed: commit the others on their own, so no caller pays for another's error.
            results = groups.map { changes in
                Result {
                    if changes.isEmpty { return [] }  // a flush's marker
                    let (out, counter) = try withHead { txn, head in
                        var counter = LocalCounter(last: local.writerCounter.withLock { $0 })
                        let out = try applyLocal(changes, txn, &head, &counter)
                        return (out, counter.last)
                    }
                    local.writerCounter.withLock { $0 = max($0, counter) }
                    return out
                }
            }
        } catch {
            results = [.failure(error)]
        }
        let events = results.flatMap { (try? $0.get()) ?? [] }
        if let ticket = events.map(\.ticket).max(), ticket > 0 { local.publishedTicket.max(ticket, ordering: .releasing) }
        if !events.isEmpty { observers.publish(events) }
        for changes in groups { Self.wipePlaintexts(changes) }
        return results
    }

    /// Zeroes the plaintexts of sealed changes once no transaction can need them again (a write
    /// may run its body twice, after growing the map): the storage itself, shared with the
    /// caller's copies, not a copy-on-write copy of it.
    package static func wipePlaintexts(_ changes: [PendingChange]) {
        // By index: a `for change in` loop would copy every change to look at one field.
        for index in changes.indices where changes[index].sealer != nil { Sodium.wipeShared(changes[index].payload) }
    }

    private func applyLocal(
        _ changes: [PendingChange], _ txn: borrowing Transaction, _ head: inout LogHead, _ counter: inout LocalCounter
    ) throws -> [CommittedEvent] {
        if counter.last == 0, !changes.isEmpty {
            // The first event of this writer: record the writer (and when it was drawn) in `meta`.
            try txn.put(dbs.meta, key: MetaKey.writer(writer), value: UnixMilliseconds.now().bigEndianBytes)
        }
        var committed: [CommittedEvent] = []
        committed.reserveCapacity(changes.count)
        let (now, planner) = (UnixMilliseconds.now(), retentionPlanner)  // a planner copies the log's storage: make one
        var asked: AskedSealingKey?
        for change in changes {
            if change.expectedOrder != nil || change.expectedTicket != nil {
                var current: ConflictOrder?
                try txn.withValue(dbs.view(change.domain), key: Array(change.key.utf8)) { bytes in current = ViewEntry.order(of: bytes) }
                if let expected = change.expectedOrder, current != expected { throw StaleRead() }
                if let ticket = change.expectedTicket {
                    // The order its change committed with (in this transaction or an earlier one);
                    // none when it failed or committed before it was watched: read again.
                    guard let committed = local.watchedTickets.withLock({ $0[ticket] ?? nil }), current == committed else { throw StaleRead() }
                }
            }
            let historyPrefix = HistoryKey.prefix(domain: change.domain, name: change.key)
            try planner.recordRetention(of: change, prefix: historyPrefix, txn, &head)
            let eventCounter = try nextCounter(&counter, txn)
            let hlc: HLC
            if let stamp = change.stamp {
                hlc = stamp  // an import or a rename: its own time, which moves no clock
            } else {
                head.hlc = HLC.next(after: head.hlc, nowMilliseconds: now)
                hlc = head.hlc
            }
            var event = Event(
                origin: writer, counter: eventCounter, replica: replica, hlc: hlc, domain: change.domain, op: change.op,
                policy: change.policy, encoding: change.encoding, sealed: false, key: change.key, payload: change.payload)
            if let sealer = change.sealer { try sealer.seal(&event, with: try sealingKey(sealer, &asked, txn, &head)) }
            if let authenticator = change.authenticator {
                try authenticator.authenticate(&event, with: try sealingKey(authenticator, &asked, txn, &head))
            }
            let (sequence, won) = try append(event, txn, &head, historyPrefix: historyPrefix)
            if change.ticket != 0, local.watchedCount.load(ordering: .acquiring) > 0 {
                local.watchedTickets.withLock { watched in
                    if watched.keys.contains(change.ticket) { watched[change.ticket] = .some(event.order) }
                }
            }
            committed.append(CommittedEvent(sequence: sequence, event: event, isWinner: won, ticket: change.ticket))
        }
        return committed
    }

    /// This opening's writer's counter through one write transaction: the last one used, and the
    /// next span of its counters that `dots` already holds.
    ///
    /// Only this opening writes as `writer`, but another process sharing the file may have
    /// imported a carrier's events under the writer's next identities (rows), and compacted some
    /// (ranges): a local write skips them rather than fail or take an identity that is someone
    /// else's. The span is looked up once a transaction and again only past it (two seeks,
    /// where a lookup per event cost 17% of a batch), and a span is skipped whole.
    struct LocalCounter {
        var last: UInt64
        var taken: ClosedRange<UInt64>?
        var looked = false
    }

    /// The counter of the next local event.
    /// - Throws: `storeUnavailable` when the counters up to 2^48 are spent (or taken).
    func nextCounter(_ counter: inout LocalCounter, _ txn: borrowing Transaction) throws -> UInt64 {
        if !counter.looked {
            counter.taken = try nextTaken(after: counter.last, txn)
            counter.looked = true
        }
        guard counter.last < Event.maxCounter else { throw Self.countersSpent }
        counter.last += 1
        // A span starts above the last counter used (it is looked up after it): skip it whole.
        while let span = counter.taken, span.lowerBound <= counter.last {
            guard span.upperBound < Event.maxCounter else { throw Self.countersSpent }
            counter.last = max(counter.last, span.upperBound + 1)
            counter.taken = try nextTaken(after: counter.last - 1, txn)
        }
        return counter.last
    }

    /// The key a sealer seals and authenticates with, asked once a transaction: a member's
    /// sealed write is sealed and authenticated, and a batch holds many changes, but the active
    /// key (`dk.active`) is read, and a first key made, once.
    private func sealingKey(
        _ sealer: any EventSealer, _ asked: inout AskedSealingKey?, _ txn: borrowing Transaction, _ head: inout LogHead
    ) throws -> SealingKey {
        let owner = sealer as AnyObject  // held by `asked`: a boxed value never shares an identity with it
        if let asked, asked.owner === owner { return asked.key }
        let key = try keyRecords.sealingKey(sealer, txn, &head)
        asked = AskedSealingKey(owner: owner, key: key)
        return key
    }

    /// A sealer and the key it gave in this transaction.
    private struct AskedSealingKey {
        var owner: AnyObject
        var key: SealingKey
    }

    private static let countersSpent = ChronicleError.storeUnavailable(reason: "this writer's counters are spent; reopen the store")

    /// The lowest span of this opening's writer's counters above `counter` that `dots` holds,
    /// from the first key under the writer's 16 bytes and the first compacted range; `nil` when
    /// neither is there. The row is one seek whatever the file holds; the range one seek and at
    /// most ``CompactedIdentities/maxKeysPassedOver`` steps.
    private func nextTaken(after counter: UInt64, _ txn: borrowing Transaction) throws -> ClosedRange<UInt64>? {
        guard counter < .max else { return nil }
        var row: UInt64?
        let origin = writer.bytes
        try txn.scanInPlace(dbs.dots, from: origin.appendingBigEndian(counter + 1)) { key, _ in
            // Keys sort by their bytes, so the first key from here under the writer's 16 bytes
            // has a counter field no greater than its next row's. A key of another kind whose
            // bytes begin like the writer's id (an `R` or `O` key) then costs a free counter,
            // never a walk over every such key; a key too short to hold one is a damaged file
            // (the insert of a taken identity then fails with an error).
            guard key.count >= 24, key[0..<16].elementsEqual(origin) else { return false }
            row = UInt64(bigEndian: key.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
            return false
        }
        let range = try CompactedIdentities.next(origin: writer, after: counter, txn, dbs)
        guard let row else { return range }
        guard let range, range.lowerBound <= row else { return row...row }
        return range
    }

    /// Runs `body` in one write transaction with the log head, then writes the head (and its MAC)
    /// back: the one place a write reads and writes the head. `write` says when: `.always`, or
    /// only when `body` moved the head, so a transaction that appends nothing commits nothing
    /// (an idle automatic pull, a compaction with nothing to drop).
    package func withHead<R>(
        _ write: HeadWrite = .always, _ body: (borrowing Transaction, inout LogHead) throws -> R
    ) throws -> R {
        var appended: (keys: [[UInt8]], beyond: Int) = ([], 0)
        defer { sweeper.sweepIfDue(noting: appended.keys, beyond: appended.beyond) }
        return try environment.write { txn in
            var head = try LogHead.read(txn, dbs)
            // A head edited outside Chronicle is refused, not re-signed by this write's MAC.
            try head.checkMAC(txn, dbs, keys: chainKeys)
            try historyIndex.repairHistoryIfStale(txn, head: head)
            let before = head
            let result = try body(txn, &head)
            appended = (head.appendedHistory, head.appendedBeyondList)
            if let rules = head.retentionRules { retention.rules.withLock { $0 = rules } }
            switch write {
            case .always: break
            case .whenChanged: if before.sameTip(as: head) { return result }
            case .whenAppended: if before.sameRecords(as: head) { return result }
            }
            try head.write(txn, dbs, chainKey: try chainKeys.key(head.chainKeyID))
            return result
        }
    }

    /// When ``withHead(_:_:)`` writes the head back.
    package enum HeadWrite: Sendable {
        /// Whatever `body` did.
        case always
        /// When `body` moved the sequence, the clock, the chain or the chain key.
        case whenChanged
        /// When `body` moved the sequence, the chain or the chain key: a clock advance alone is
        /// written by whoever made it (the drift guard's promotion writes its own).
        case whenAppended
    }

    /// Appends `record` (its kind byte and body: ``LogRecord/unchained(_:body:)``) at the head's next
    /// sequence, chained to the head's hash with `key` (`nil`: unkeyed), and advances the head: the
    /// one place a record joins the chain. - Returns: the record's sequence.
    @discardableResult
    package func appendRecord(_ record: consuming [UInt8], key: KeyedHash?, _ txn: borrowing Transaction, _ head: inout LogHead) throws -> UInt64 {
        var record = record
        let hash = LogRecord.chain(&record, previous: head.chain, sequence: head.sequence + 1, key: key)
        try txn.put(dbs.events, key: .bigEndian(head.sequence + 1), value: .array(record), flags: .append)
        (head.sequence, head.chain) = (head.sequence + 1, hash)
        return head.sequence
    }

    /// Appends an event to the log, records its dot and history, and (unless told not to) applies it to its view.
    /// - Returns: the event's sequence, and whether it became its key's current view entry.
    @discardableResult
    /// - Parameter encoded: the event's encoding in the current format, when the caller has it.
    /// - Parameter historyPrefix: the key's history prefix (``HistoryKey``), when the caller built it.
    package func append(
        _ event: Event, _ txn: borrowing Transaction, _ head: inout LogHead, indexView: Bool = true, encoded: [UInt8]? = nil,
        historyPrefix: [UInt8]? = nil
    ) throws -> (sequence: UInt64, won: Bool) {
        let sequence = try appendRecord(encoded.map { LogRecord.unchained(.event, body: $0) } ?? event.unchainedRecord(), key: try head.chainKey(chainKeys), txn, &head)
        guard try txn.insert(dbs.dots, key: .bigEndianWords(event.origin.high, event.origin.low, event.counter), value: .bigEndian(sequence)) else {
            throw ChronicleError.corruptRecord(sequence: sequence, reason: "dot \(event.origin.short):\(event.counter) is already in the log")
        }
        let prefix = historyPrefix ?? HistoryKey.prefix(domain: event.domain, name: event.key)
        try historyIndex.indexHistory(prefix, sequence: sequence, txn, &head)
        let won = indexView ? try EventLog.indexView(event, sequence: sequence, txn, dbs) : false
        return (sequence, won)
    }

    /// Applies the event to its view when it wins over the current entry (last writer wins);
    /// returns whether it did.
    @discardableResult
    package static func indexView(_ event: Event, sequence: UInt64, _ txn: borrowing Transaction, _ dbs: Databases) throws -> Bool {
        let view = dbs.view(event.domain)
        let key = LMDBBytes.utf8(event.key)
        var current: ConflictOrder?
        var malformed = false
        try txn.withValue(view, key: key) { bytes in
            current = ViewEntry.order(of: bytes)
            malformed = current == nil
        }
        if malformed {
            throw ChronicleError.corruptViewEntry(key: event.key, reason: "its order fields do not decode")
        }
        if let current, !event.wins(over: current) { return false }
        try txn.put(view, key: key, value: .array(ViewEntry(event: event, sequence: sequence).encoded()))
        return true
    }

    /// The `dots` key of an opaque record: `"O"` ‖ BLAKE2b-256 of its bytes (33 bytes, so it never
    /// meets a 24-byte dot). Opaque records are known by their bytes, never by the identity they claim.
    package static func opaqueKey(_ bytes: [UInt8]) -> [UInt8] { [0x4F] + GenericHash.hash(bytes) }

    /// Appends a relay-only record (an event this build cannot read, or a second version of an
    /// identity at a store that verifies nothing) unless the same bytes are stored already;
    /// returns whether it appended.
    @discardableResult
    package func appendOpaque(_ item: OpaqueEvent, _ txn: borrowing Transaction, _ head: inout LogHead) throws -> Bool {
        let key = Self.opaqueKey(item.bytes)
        guard try txn.get(dbs.dots, key: key) == nil else { return false }
        let sequence = try appendRecord(LogRecord.unchained(.opaque, body: item.bytes), key: try chainKeys.key(head.chainKeyID), txn, &head)
        try txn.put(dbs.dots, key: key, value: sequence.bigEndianBytes)
        return true
    }
}
