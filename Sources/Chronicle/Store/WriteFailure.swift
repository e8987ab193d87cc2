import ChronicleFormat
import Synchronization

/// A change made with a non-throwing form (`store[key] = value`, a `@Default` or `@Secret`
/// setter) that could not be committed.
///
/// The change was visible to this process from the moment it was made; when its commit failed,
/// the keys went back to their stored values (observers hear them again). Each failure is
/// published to ``Store/writeFailures`` and thrown by the next ``Store/flush()``.
///
/// ```swift
/// Task {
///     for await failure in store.writeFailures {
///         showAlert("Settings could not be saved: \(failure.error)")
///     }
/// }
/// ```
public struct WriteFailure: Sendable, Equatable, CustomStringConvertible {
    /// The names of the keys whose changes were dropped.
    public let keys: [String]
    /// Why (a full disk says so, with what to do).
    public let error: ChronicleError

    public var description: String { "changes of \(keys.joined(separator: ", ")) were not saved: \(error)" }
}

/// The failures of queued changes that no flush has thrown yet, and the streams that hear them.
struct WriteFailures: ~Copyable {
    /// Oldest first, each with the ticket of its last change; bounded (the first ones are kept).
    var unreported: [(ticket: UInt64, failure: WriteFailure)] = []
    var listeners: [Int: AsyncStream<WriteFailure>.Continuation] = [:]
    var nextListener = 0
    static let limit = 256
}

extension EventLog {
    /// Records a failure of queued changes for the next flush and tells every listener.
    func recordFailure(_ failure: WriteFailure, ticket: UInt64) {
        let listeners = failures.withLock { failures in
            if failures.unreported.count < WriteFailures.limit { failures.unreported.append((ticket, failure)) }
            return Array(failures.listeners.values)
        }
        for listener in listeners { listener.yield(failure) }
    }

    /// Removes every unreported failure of a change queued up to `ticket` and returns the first
    /// (the others were published to the write-failure streams and logged).
    func takeFailure(through ticket: UInt64) -> WriteFailure? {
        failures.withLock { failures in
            let first = failures.unreported.first(where: { $0.ticket <= ticket })?.failure
            failures.unreported.removeAll { $0.ticket <= ticket }
            return first
        }
    }

    /// A stream of every failure from now on.
    func failureStream() -> AsyncStream<WriteFailure> {
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
