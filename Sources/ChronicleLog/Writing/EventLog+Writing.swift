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
            var counter = LocalCounter(writer: writer, last: local.writerCounter.withLock { $0 })
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
                var counter = LocalCounter(writer: writer, last: local.writerCounter.withLock { $0 })
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
                        var counter = LocalCounter(writer: writer, last: local.writerCounter.withLock { $0 })
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
        // In passes: the changes' events are made, then (``indexAppended``) their records join the
        // chain, then their dots, history links and views follow, each database's rows in turn, for
        // each segment between changes that read the store first (a view, or a key that may key
        // the chain). The same rows as one change at a time, but each pass's code stays in the
        // instruction cache: one change at a time missed it 14 times as often (callgrind).
        var committed: [CommittedEvent] = []
        committed.reserveCapacity(changes.count)
        var prefixes: [[UInt8]] = []
        prefixes.reserveCapacity(changes.count)
        let (now, planner) = (UnixMilliseconds.now(), retentionPlanner)  // a planner copies the log's storage: make one
        var asked: AskedSealingKey?
        var indexed = 0  // the changes before it have their dots, history links and views
        for change in changes {
            if change.expectedOrder != nil || change.expectedTicket != nil {
                try indexAppended(&committed, prefixes, from: indexed, txn, &head)  // what it reads first
                indexed = committed.count
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
            let eventCounter = try counter.next(txn, dbs)
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
            if Self.asks(change.sealer, beyond: asked) || Self.asks(change.authenticator, beyond: asked) {
                // Asking for a key may make the store's first and key the chain with a record of its own:
                // the changes before it join the chain first, under the key they had.
                try indexAppended(&committed, prefixes, from: indexed, txn, &head)
                indexed = committed.count
            }
            if let sealer = change.sealer { try sealer.seal(&event, with: try sealingKey(sealer, &asked, txn, &head)) }
            if let authenticator = change.authenticator {
                try authenticator.authenticate(&event, with: try sealingKey(authenticator, &asked, txn, &head))
            }
            committed.append(CommittedEvent(sequence: 0, event: event, ticket: change.ticket))
            prefixes.append(historyPrefix)
        }
        try indexAppended(&committed, prefixes, from: indexed, txn, &head)
        return committed
    }

    /// Writes `committed[start...]`, made in this transaction, in passes: their records join the
    /// chain (which fills in their sequences), then their dots, their history links, their views
    /// (whether each won), and the tickets watched.
    private func indexAppended(
        _ committed: inout [CommittedEvent], _ prefixes: [[UInt8]], from start: Int, _ txn: borrowing Transaction, _ head: inout LogHead
    ) throws {
        guard start < committed.count else { return }
        let chainKey = try head.chainKey(chainKeys)
        for index in start..<committed.count {
            committed[index].sequence = try appendRecord(committed[index].event.unchainedRecord(), key: chainKey, txn, &head)
        }
        for index in start..<committed.count { try insertDot(of: committed[index].event, sequence: committed[index].sequence, txn) }
        try historyIndex.indexHistory(zip(prefixes[start...], committed[start...].lazy.map(\.sequence)), txn, &head)
        for index in start..<committed.count {
            committed[index].isWinner = try EventLog.indexView(committed[index].event, sequence: committed[index].sequence, txn, dbs)
        }
        guard local.watchedCount.load(ordering: .acquiring) > 0 else { return }
        for index in start..<committed.count where committed[index].ticket != 0 {
            let (ticket, order) = (committed[index].ticket, committed[index].event.order)
            local.watchedTickets.withLock { watched in
                if watched.keys.contains(ticket) { watched[ticket] = .some(order) }
            }
        }
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

    /// Whether `sealer` asks for a key that `asked` does not hold (reading the store, perhaps writing it).
    private static func asks(_ sealer: (any EventSealer)?, beyond asked: AskedSealingKey?) -> Bool {
        guard let sealer else { return false }
        return (sealer as AnyObject) !== asked?.owner
    }

    /// A sealer and the key it gave in this transaction.
    private struct AskedSealingKey {
        var owner: AnyObject
        var key: SealingKey
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
    /// - Parameter encoded: the event's encoding in the current format, when the caller has it.
    /// - Returns: the event's sequence, and whether it became its key's current view entry.
    @discardableResult
    package func append(
        _ event: Event, _ txn: borrowing Transaction, _ head: inout LogHead, indexView: Bool = true, encoded: [UInt8]? = nil
    ) throws -> (sequence: UInt64, won: Bool) {
        let sequence = try appendRecord(encoded.map { LogRecord.unchained(.event, body: $0) } ?? event.unchainedRecord(), key: try head.chainKey(chainKeys), txn, &head)
        try insertDot(of: event, sequence: sequence, txn)
        try historyIndex.indexHistory(CollectionOfOne((HistoryKey.prefix(domain: event.domain, name: event.key), sequence)), txn, &head)
        let won = indexView ? try EventLog.indexView(event, sequence: sequence, txn, dbs) : false
        return (sequence, won)
    }

    /// Records the event's dot (its identity) as the record at `sequence`.
    /// - Throws: `.corruptRecord` when the log holds the identity already.
    private func insertDot(of event: Event, sequence: UInt64, _ txn: borrowing Transaction) throws {
        guard try txn.insert(dbs.dots, key: .bigEndianWords(event.origin.high, event.origin.low, event.counter), value: .bigEndian(sequence)) else {
            throw ChronicleError.corruptRecord(sequence: sequence, reason: "dot \(event.origin.short):\(event.counter) is already in the log")
        }
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
