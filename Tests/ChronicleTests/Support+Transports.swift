@testable import Chronicle
import ChronicleFormat
import Foundation

/// A relay that loses key records from its pulls while `strips` is set (its members' events
/// arrive without their keys), and can be told to fail, or to be unable, to answer a request
/// for events by identity.
struct LossyRelayTransport: SyncTransport {
    let base: any SyncTransport
    let strips = Shared(false)
    let failsAsking = Shared(false)
    let cannotAsk = Shared(false)
    let asked = Shared(0)

    func info() async throws -> ReplicaInfo { try await base.info() }

    func pull(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) async throws -> Data {
        let data = try await base.pull(after: after, filter: filter, excludingOrigin: origin, maxEvents: maxEvents)
        guard strips.withLock({ $0 }) else { return data }
        var range = try EventRange(decoding: Array(data))
        range.keys = []
        return Data(range.encoded())
    }

    func push(_ range: Data) async throws -> RangeReceipt { try await base.push(range) }

    func pullEvents(_ identities: [EventIdentity]) async throws -> Data? {
        try await answerEvents(identities)?.range
    }

    func answerEvents(_ identities: [EventIdentity]) async throws -> EventAnswer? {
        asked.withLock { $0 += 1 }
        if failsAsking.withLock({ $0 }) { throw ChronicleError.syncFailed(peer: "a lossy relay", reason: "HTTP 503: retry") }
        if cannotAsk.withLock({ $0 }) { return nil }
        return try await base.answerEvents(identities)
    }
}

/// A transport that counts the pulls it answers (each one an import at the puller).
struct CountingTransport: SyncTransport {
    let base: any SyncTransport
    let pulls: Shared<Int>

    func info() async throws -> ReplicaInfo { try await base.info() }

    func pull(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) async throws -> Data {
        pulls.withLock { $0 += 1 }
        return try await base.pull(after: after, filter: filter, excludingOrigin: origin, maxEvents: maxEvents)
    }

    func push(_ range: Data) async throws -> RangeReceipt { try await base.push(range) }

    func answerEvents(_ identities: [EventIdentity]) async throws -> EventAnswer? {
        pulls.withLock { $0 += 1 }
        return try await base.answerEvents(identities)
    }
}
