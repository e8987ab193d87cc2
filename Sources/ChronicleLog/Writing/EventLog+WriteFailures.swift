package import ChronicleFormat
import Synchronization

extension EventLog {
    /// Records a failure of queued changes for the next flush and tells every listener.
    package func recordFailure(_ failure: WriteFailure, ticket: UInt64) {
        let listeners = local.failures.withLock { $0.record(failure, ticket: ticket) }
        for listener in listeners { listener.yield(failure) }
    }

    /// Removes every unreported failure of a change queued up to `ticket` and returns the first
    /// (the others were published to the write-failure streams and logged).
    package func takeFailure(through ticket: UInt64) -> WriteFailure? {
        local.failures.withLock { $0.take(through: ticket) }
    }

    /// A stream of every failure from now on.
    package func failureStream() -> AsyncStream<WriteFailure> {
        let (stream, continuation) = AsyncStream<WriteFailure>.makeStream(bufferingPolicy: .bufferingNewest(UnreportedWriteFailures.limit))
        let id = local.failures.withLock { $0.addListener(continuation) }
        continuation.onTermination = { [weak self] _ in self?.local.failures.withLock { $0.removeListener(id) } }
        return stream
    }
}
