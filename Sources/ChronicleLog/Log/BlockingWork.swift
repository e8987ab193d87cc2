import ChronicleFormat
import Dispatch

/// Runs blocking work (an LMDB commit and its fsync, file I/O) on threads
/// outside Swift's cooperative pool.
///
/// The cooperative pool has one thread per core (two on a small machine); a
/// task that blocks one of them on a disk flush stalls every other task that
/// would run there, the UI's included. Async APIs hand their blocking part to
/// this queue and suspend until it is done.
package enum BlockingWork {
    private static let queue = DispatchQueue(label: "chronicle.blocking-work", qos: .utility, attributes: .concurrent)

    /// Runs `body` on a blocking-work thread and returns its result.
    package static func run<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try body() }) }
        }
    }
}
