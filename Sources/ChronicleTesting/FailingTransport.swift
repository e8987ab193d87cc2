import ChronicleFormat
public import Chronicle
public import Foundation
import Synchronization

/// Wraps a transport and fails on chosen calls: for testing that an
/// interrupted sync resumes without loss or duplicates.
public final class FailingTransport: SyncTransport {
    /// Which calls fail.
    public enum Failure: Sendable {
        /// The `n`th push (counting from 1) fails before reaching the remote.
        case pushBeforeDelivery(Int)
        /// The `n`th push is delivered and applied, then the acknowledgement is lost.
        case pushAfterDelivery(Int)
        /// The `n`th pull fails.
        case pull(Int)
    }

    /// The error the failing calls throw.
    public struct InjectedFailure: Error, CustomStringConvertible {
        public var description: String { "injected transport failure" }
    }

    private let base: any SyncTransport
    private let failures: [Failure]
    private let counts = Mutex<(pushes: Int, pulls: Int)>((0, 0))

    /// Wraps `base`, failing as `failures` say.
    public init(_ base: any SyncTransport, failing failures: [Failure]) {
        self.base = base
        self.failures = failures
    }

    public func info() async throws -> ReplicaInfo { try await base.info() }

    public func pull(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) async throws -> Data {
        let n = counts.withLock { $0.pulls += 1; return $0.pulls }
        if failures.contains(where: { if case .pull(n) = $0 { true } else { false } }) { throw InjectedFailure() }
        return try await base.pull(after: after, filter: filter, excludingOrigin: origin, maxEvents: maxEvents)
    }

    public func push(_ range: Data) async throws -> RangeReceipt {
        try await push(range, filter: nil)
    }

    public func push(_ range: Data, filter: RangeFilter) async throws -> RangeReceipt {
        try await push(range, filter: Optional(filter))
    }

    private func push(_ range: Data, filter: RangeFilter?) async throws -> RangeReceipt {
        let n = counts.withLock { $0.pushes += 1; return $0.pushes }
        if failures.contains(where: { if case .pushBeforeDelivery(n) = $0 { true } else { false } }) { throw InjectedFailure() }
        let receipt = if let filter { try await base.push(range, filter: filter) } else { try await base.push(range) }
        if failures.contains(where: { if case .pushAfterDelivery(n) = $0 { true } else { false } }) { throw InjectedFailure() }
        return receipt
    }
}
