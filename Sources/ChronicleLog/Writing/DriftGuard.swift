package import ChronicleFormat
import ChronicleLMDB
import Logging
package import Synchronization

/// The clock-drift guard: an event stamped further ahead of this device's clock than the
/// configured drift waits in `deferred` (keyed HLC ‖ sequence), indexed in the log but out of
/// the views, until its time comes; a timer (and every commit) promotes what is due.
///
/// The rule (``Rule``) needs no store; ``DriftGuardTests`` checks it alone. The log owns one
/// guard and calls it inside its transactions.
package final class DriftGuard: Sendable {
    /// Which events wait, and until when.
    package struct Rule: Sendable {
        /// How far ahead of this device's clock an event may be stamped and still join the views.
        package let milliseconds: UInt64

        package init(milliseconds: UInt64) { self.milliseconds = milliseconds }

        /// Whether an event stamped `hlc` waits (its time is further ahead of `now` than the drift).
        package func isAhead(_ hlc: HLC, now: UInt64) -> Bool {
            hlc.milliseconds > UnixMilliseconds.adding(milliseconds, to: now)
        }

        /// When an event stamped at `stamped` (Unix ms) may join the views (Unix ms).
        package func dueTime(of stamped: UInt64) -> UInt64 {
            stamped > milliseconds ? stamped - milliseconds : 0
        }
    }

    package let rule: Rule
    private let dbs: Databases
    /// Wakes when the first waiting event is due (see ``schedule(at:promote:)``).
    package let timer = Mutex<(task: Task<Void, Never>, due: UInt64)?>(nil)

    init(milliseconds: UInt64, dbs: Databases) {
        rule = Rule(milliseconds: milliseconds)
        self.dbs = dbs
    }

    deinit { timer.withLock { $0?.task.cancel() } }

    /// Whether an event stamped `hlc` waits (see ``Rule/isAhead(_:now:)``).
    package func isAhead(_ hlc: HLC, now: UInt64) -> Bool { rule.isAhead(hlc, now: now) }

    /// The waiting-list key of an event.
    static func key(_ hlc: HLC, sequence: UInt64) -> [UInt8] {
        hlc.rawValue.bigEndianBytes + sequence.bigEndianBytes
    }

    /// Puts the event at `sequence` on the waiting list.
    func hold(_ hlc: HLC, sequence: UInt64, _ txn: borrowing Transaction) throws {
        try txn.put(dbs.deferred, key: Self.key(hlc, sequence: sequence), value: [])
    }

    /// Whether the event at `sequence` waits.
    func holds(_ hlc: HLC, sequence: UInt64, _ txn: borrowing Transaction) throws -> Bool {
        try txn.get(dbs.deferred, key: Self.key(hlc, sequence: sequence)) != nil
    }

    /// Every `deferred` row as `sequence → the HLC the row holds`, for `verify`, which checks each
    /// against its event; a row that is not `HLC ‖ sequence` (16 bytes) is damage.
    func waitingRows(_ txn: borrowing Transaction) throws -> [UInt64: UInt64] {
        var rows: [UInt64: UInt64] = [:]
        try txn.scan(dbs.deferred) { key, _ in
            guard key.count == 16, let hlc = UInt64(bigEndianBytes: Array(key.prefix(8))), let sequence = UInt64(bigEndianBytes: Array(key.suffix(8)))
            else {
                throw ChronicleError.corruptRecord(sequence: 0, reason: "a drift-guard row of \(key.count) bytes (deferred): the database was edited")
            }
            rows[sequence] = hlc
            return true
        }
        return rows
    }

    /// The sequences of every waiting event.
    func waiting(_ txn: borrowing Transaction) throws -> Set<UInt64> {
        var waiting = Set<UInt64>()
        try txn.scan(dbs.deferred) { key, _ in
            if let sequence = UInt64(bigEndianBytes: Array(key.suffix(8))) { waiting.insert(sequence) }
            return true
        }
        return waiting
    }

    /// Moves events whose time has come from the waiting list into the views, advancing the
    /// local clock past each (so the user's next change of the key wins over it).
    ///
    /// Writes the clock to `meta` itself (the head MAC does not cover it), so callers that do
    /// not write the head afterwards keep the advance.
    /// - Returns: the promoted events (for observers), and when the next waiting event is
    ///   due (Unix ms), if any waits.
    @discardableResult
    func promoteDue(_ txn: borrowing Transaction, head: inout LogHead, now: UInt64) throws -> (promoted: [CommittedEvent], nextDue: UInt64?) {
        var due: [([UInt8], UInt64)] = []
        var nextDue: UInt64?
        try txn.scan(dbs.deferred) { key, _ in
            guard key.count == 16, let hlc = UInt64(bigEndianBytes: Array(key.prefix(8))),
                let sequence = UInt64(bigEndianBytes: Array(key.suffix(8)))
            else { return false }
            guard !isAhead(HLC(rawValue: hlc), now: now) else {
                nextDue = rule.dueTime(of: HLC(rawValue: hlc).milliseconds)  // > now
                return false
            }
            due.append((key, sequence))
            return true
        }
        var promoted: [CommittedEvent] = []
        for (key, sequence) in due {
            if let bytes = try txn.get(dbs.events, key: sequence.bigEndianBytes) {
                let event = try LogRecord(decoding: bytes, sequence: sequence).event(sequence: sequence)
                let won = try EventLog.indexView(event, sequence: sequence, txn, dbs)
                promoted.append(CommittedEvent(sequence: sequence, event: event, isWinner: won))
                head.hlc = max(head.hlc, event.hlc)
            }
            try txn.delete(dbs.deferred, key: key)
        }
        if !promoted.isEmpty { try txn.put(dbs.meta, key: MetaKey.hlc, value: head.hlc.rawValue.bigEndianBytes) }
        return (promoted, nextDue)
    }

    /// When the first waiting event is due (Unix ms), if any waits.
    func nextDue(_ txn: borrowing Transaction) throws -> UInt64? {
        var next: UInt64?
        try txn.scanInPlace(dbs.deferred) { key, _ in
            if key.count == 16 { next = HLC(rawValue: UInt64(bigEndian: key.loadUnaligned(as: UInt64.self))).milliseconds }
            return false
        }
        return next.map(rule.dueTime(of:))
    }

    /// Runs `promote` when the first waiting event's time comes (`nil`: none waits, as seen by
    /// the caller's transaction), whether or not anything else is written by then. A timer due
    /// earlier is kept: callers race (an import that just deferred an event, a commit that saw
    /// none waiting), and a timer that wakes for nothing only re-reads the waiting list.
    func schedule(at due: UInt64?, logger: Logger, promote: @escaping @Sendable () throws -> Void) {
        guard let due else { return }
        timer.withLock { timer in
            if let current = timer, current.due <= due, !current.task.isCancelled { return }
            timer?.task.cancel()
            let task = Task.detached { [weak self] in
                let now = UnixMilliseconds.now()
                try? await Task.sleep(for: .milliseconds(due > now ? due - now : 0) + .milliseconds(1))
                guard !Task.isCancelled, let self else { return }
                self.timer.withLock { timer in if timer?.due == due { timer = nil } }
                do { try await BlockingWork.run { try promote() } } catch {
                    logger.error("promoting events held by the drift guard failed", metadata: ["error": "\(error)"])
                }
            }
            timer = (task, due)
        }
    }
}

extension EventLog {
    /// Promotes the drift guard's events whose time has come, and schedules the next promotion.
    package func promoteDue() throws {
        let (promoted, nextDue) = try environment.write { txn in
            var head = try LogHead.read(txn, dbs)
            return try driftGuard.promoteDue(txn, head: &head, now: UnixMilliseconds.now())
        }
        if !promoted.isEmpty { observers.publish(promoted) }
        schedulePromotion(at: nextDue)
    }

    /// Promotes waiting events when the first one's time comes (see ``DriftGuard/schedule(at:logger:promote:)``).
    package func schedulePromotion(at due: UInt64?) {
        driftGuard.schedule(at: due, logger: logger) { [weak self] in try self?.promoteDue() }
    }

    /// When the first event held by the drift guard is due (Unix ms), if any waits.
    package func nextPromotion() throws -> UInt64? {
        try environment.read { txn in try driftGuard.nextDue(txn) }
    }
}
