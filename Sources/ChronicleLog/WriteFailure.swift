package import ChronicleFormat
import Synchronization

/// The failures of queued changes that no flush has thrown yet, and the streams that hear them.
package struct WriteFailures: ~Copyable {
    /// Oldest first, each with the ticket of its last change; bounded (the first ones are kept).
    package var unreported: [(ticket: UInt64, failure: WriteFailure)] = []
    package var listeners: [Int: AsyncStream<WriteFailure>.Continuation] = [:]
    package var nextListener = 0
    package static let limit = 256
}

extension EventLog {
    /// Records a failure of queued changes for the next flush and tells every listener.
    package func recordFailure(_ failure: WriteFailure, ticket: UInt64) {
        let listeners = failures.withLock { failures in
            if failures.unreported.count < WriteFailures.limit { failures.unreported.append((ticket, failure)) }
            return Array(failures.listeners.values)
        }
        for listener in listeners { listener.yield(failure) }
    }

    /// Removes every unreported failure of a change queued up to `ticket` and returns the first
    /// (the others were published to the write-failure streams and logged).
    package func takeFailure(through ticket: UInt64) -> WriteFailure? {
        failures.withLock { failures in
            let first = failures.unreported.first(where: { $0.ticket <= ticket })?.failure
            failures.unreported.removeAll { $0.ticket <= ticket }
            return first
        }
    }

    /// A stream of every failure from now on.
    package func failureStream() -> AsyncStream<WriteFailure> {
        let (stream, continuation) = AsyncStream<WriteFailure>.makeStream(bufferingPolicy: .bufferingNewest(WriteFailures.limit))
        let id = failures.withLock { failures in
            failures.nextListener += 1
            failures.listeners[failures.nextListener] = continuation
            return failures.nextListener
        }
        continuation.onTermination = { [weak self] _ in _ = self?.failures.withLock { $0.listeners.removeValue(forKey: id) } }
        return stream
    }
}
