import ChronicleFormat
import ChronicleLog
import Foundation

extension Store {
    /// Returns once every change made so far in this process is durable: the non-throwing
    /// forms' changes, which are visible at once and committed moments later, included.
    ///
    /// Suspends instead of blocking a thread. In the `.noMetaSync` and `.noSync` durability
    /// modes it also flushes the data file, so it is the way to reach durability there.
    /// Together with the non-throwing setter it is the durable write for async code:
    ///
    /// ```swift
    /// store[.theme] = .dark          // returns at once
    /// try await store.flush()        // now it survives a crash of the process or the machine
    /// ```
    ///
    /// - Throws: the first failure of a change queued before the call (made with a non-throwing
    ///   form) that no earlier flush threw; those keys read their stored values again. Also
    ///   published to ``writeFailures``.
    public func flush() async throws(ChronicleError) {
        let eventLog = try eventLog
        let through = eventLog.local.lastTicket
        do {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                eventLog.local.settlePending { continuation.resume(with: $0) }
            }
            try await BlockingWork.run { try eventLog.flushFile() }
        } catch {
            // The queued writes' own failure, when one was recorded, says more than this one.
            throw eventLog.local.takeFailure(through: through)?.error ?? ChronicleError.wrap(eventLog.mappedDiskError(error))
        }
        if let failure = eventLog.local.takeFailure(through: through) { throw failure.error }
    }

    /// Every failure of a change made with a non-throwing form from now on: the way for an app
    /// to hear that `store[key] = value` (or a wrapper's setter) could not be saved.
    ///
    /// Each access makes a new stream; it ends when the iterating task is cancelled. A failure is
    /// also thrown by the next ``flush()``, and logged.
    public var writeFailures: AsyncStream<WriteFailure> {
        guard let eventLog = try? eventLog else { return AsyncStream { $0.finish() } }
        return eventLog.local.failureStream()
    }
}
