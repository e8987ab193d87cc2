import ChronicleFormat
package import ChronicleLMDB
import Logging
import Synchronization

/// The clock-drift guard: an event stamped further ahead of this device's clock than the
/// configured drift waits in `deferred`, out of the views, until its time comes; a timer (and
/// every commit) promotes what is due.
extension EventLog {
    /// Moves events whose time has come from the drift guard's waiting list into the views,
    /// advancing the local clock past each (so the user's next change of the key wins over it).
    ///
    /// Writes the clock to `meta` itself (the head MAC does not cover it), so callers that do
    /// not write the head afterwards keep the advance.
    /// - Returns: the promoted events (for observers), and when the next waiting event is
    ///   due (Unix ms), if any waits.
    @discardableResult
    package static func promoteDeferred(
        _ txn: borrowing Transaction, _ dbs: Databases, head: inout LogHead, now: UInt64, driftMilliseconds: UInt64
    ) throws -> (promoted: [CommittedEvent], nextDue: UInt64?) {
        var due: [([UInt8], UInt64)] = []
        var nextDue: UInt64?
        try txn.scan(dbs.deferred) { key, _ in
            guard key.count == 16, let hlc = UInt64(bigEndianBytes: Array(key.prefix(8))),
                let sequence = UInt64(bigEndianBytes: Array(key.suffix(8)))
            else { return false }
            let milliseconds = HLC(rawValue: hlc).milliseconds
            guard milliseconds <= UnixMilliseconds.adding(driftMilliseconds, to: now) else {
                nextDue = milliseconds - driftMilliseconds  // > now, so no underflow
                return false
            }
            due.append((key, sequence))
            return true
        }
        var promoted: [CommittedEvent] = []
        for (key, sequence) in due {
            if let bytes = try txn.get(dbs.events, key: sequence.bigEndianBytes) {
                let event = try LogRecord(decoding: bytes, sequence: sequence).event(sequence: sequence)
                let won = try indexView(event, sequence: sequence, txn, dbs)
                promoted.append(CommittedEvent(sequence: sequence, event: event, isWinner: won))
                head.hlc = max(head.hlc, event.hlc)
            }
            try txn.delete(dbs.deferred, key: key)
        }
        if !promoted.isEmpty { try txn.put(dbs.meta, key: MetaKey.hlc, value: head.hlc.rawValue.bigEndianBytes) }
        return (promoted, nextDue)
    }

    /// Promotes the drift guard's events whose time has come, and schedules the next promotion.
    package func promoteDue() throws {
        let (promoted, nextDue) = try environment.write { txn in
            var head = try LogHead.read(txn, dbs)
            return try EventLog.promoteDeferred(txn, dbs, head: &head, now: UnixMilliseconds.now(), driftMilliseconds: driftMilliseconds)
        }
        if !promoted.isEmpty { observers.publish(promoted) }
        schedulePromotion(at: nextDue)
    }

    /// Promotes waiting events when the first one's time comes (`nil`: none waits, as seen by
    /// the caller's transaction), whether or not anything else is written by then. A timer due
    /// earlier is kept: callers race (an import that just deferred an event, a commit that saw
    /// none waiting), and a timer that wakes for nothing only re-reads the waiting list.
    package func schedulePromotion(at due: UInt64?) {
        guard let due else { return }
        promotionTimer.withLock { timer in
            if let current = timer, current.due <= due, !current.task.isCancelled { return }
            timer?.task.cancel()
            let task = Task.detached { [weak self] in
                let now = UnixMilliseconds.now()
                try? await Task.sleep(for: .milliseconds(due > now ? due - now : 0) + .milliseconds(1))
                guard !Task.isCancelled, let self else { return }
                self.promotionTimer.withLock { timer in if timer?.due == due { timer = nil } }
                do { try await BlockingWork.run { try self.promoteDue() } } catch {
                    self.logger.error("promoting events held by the drift guard failed", metadata: ["error": "\(error)"])
                }
            }
            timer = (task, due)
        }
    }

    /// When the first event held by the drift guard is due (Unix ms), if any waits.
    package func nextPromotion() throws -> UInt64? {
        try environment.read { txn in
            var next: UInt64?
            try txn.scanInPlace(dbs.deferred) { key, _ in
                if key.count == 16 { next = HLC(rawValue: UInt64(bigEndian: key.loadUnaligned(as: UInt64.self))).milliseconds }
                return false
            }
            return next.map { $0 > driftMilliseconds ? $0 - driftMilliseconds : 0 }
        }
    }
}
