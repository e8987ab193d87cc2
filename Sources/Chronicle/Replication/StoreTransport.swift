import ChronicleFormat
import ChronicleLog
public import Foundation

/// Replicates with another ``Store`` in the same process.
public struct StoreTransport: SyncTransport {
    /// The remote store.
    public let store: Store

    /// Creates a transport to `store`.
    public init(store: Store) { self.store = store }

    // Each call reads or commits to LMDB, so it runs off the cooperative pool.

    public func info() async throws -> ReplicaInfo {
        let store = store
        return try await BlockingWork.run { try store.replicaInfo() }
    }

    public func pull(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) async throws -> Data {
        let store = store
        return try await BlockingWork.run {
            try store.exportRange(after: after, filter: filter, excludingOrigin: origin, maxEvents: min(maxEvents, 4096))
        }
    }

    public func push(_ range: Data) async throws -> RangeReceipt {
        let store = store
        return try await BlockingWork.run { try store.importRange(range) }
    }

    public func pullEvents(_ identities: [EventIdentity]) async throws -> Data? {
        try await answerEvents(identities)?.range
    }

    public func answerEvents(_ identities: [EventIdentity]) async throws -> EventAnswer? {
        let store = store
        return try await BlockingWork.run { try store.answerEvents(identities) }
    }
}
