@testable import ChronicleHub
import Hummingbird
import Testing

/// Each tenant's share of a node's requests for events by identity, without a database: two
/// requests held at a gate take the tenant's places, a third is refused at once with 503 and
/// `Retry-After`, another tenant is not affected, and a place is given back when a request ends
/// (also by throwing).
struct TenantReadLimitTests {
    /// A gate a request waits at until the test opens it.
    final class Gate: Sendable {
        let stream: AsyncStream<Void>
        let continuation: AsyncStream<Void>.Continuation
        init() { (stream, continuation) = AsyncStream.makeStream() }
        func wait() async { for await _ in stream { return } }
        func open() { continuation.yield(()); continuation.finish() }
    }

    @Test func aTenantHoldsAtMostItsShare() async throws {
        let limit = TenantReadLimit()
        let gate = Gate()
        let held = (0..<TenantReadLimit.perTenant).map { _ in
            Task { try await limit.run(tenant: 7) { await gate.wait() } }
        }
        // Wait for the condition: both places taken.
        while limit.count(7) < TenantReadLimit.perTenant { await Task.yield() }
        await #expect {
            try await limit.run(tenant: 7) {}
        } throws: { error in
            guard let refusal = error as? HubRefusal, case .busy = refusal else { return false }
            return refusal.httpError.status.code == 503 && refusal.httpError.headers[.retryAfter] == "1"
        }
        try await limit.run(tenant: 8) {}  // another tenant has its own places
        gate.open()
        for task in held { try await task.value }
        #expect(limit.count(7) == 0)
        struct Failure: Error {}
        await #expect(throws: Failure.self) { try await limit.run(tenant: 7) { throw Failure() } }
        #expect(limit.count(7) == 0, "a request that threw kept its place")
    }
}
