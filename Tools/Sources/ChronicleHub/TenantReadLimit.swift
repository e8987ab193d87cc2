import Synchronization

/// How many requests for events by identity each tenant may have running on one node at once.
///
/// Such a request joins the asked identities against every body the tenant stores under them,
/// so one token could otherwise keep many running and take the database pool from every other
/// tenant. A request past its tenant's share is refused at once with 503 and `Retry-After`
/// (a member asks again at its next sync), never queued: a queue would hold connections.
final class TenantReadLimit: Sendable {
    /// Requests by identity one tenant may have running on a node.
    static let perTenant = 2

    private let running = Mutex<[Int64: Int]>([:])

    /// Runs `body` in one of `tenant`'s places; throws ``HubRefusal/busy(_:)`` when it has none.
    func run<Result: Sendable>(tenant: Int64, _ body: () async throws -> Result) async throws -> Result {
        let entered = running.withLock { running in
            guard running[tenant, default: 0] < Self.perTenant else { return false }
            running[tenant, default: 0] += 1
            return true
        }
        guard entered else {
            throw HubRefusal.busy("this tenant already has \(Self.perTenant) requests for events by identity running on this node; retry")
        }
        defer {
            running.withLock { running in
                running[tenant, default: 1] -= 1
                if running[tenant] == 0 { running[tenant] = nil }
            }
        }
        return try await body()
    }

    /// The requests running for `tenant` now (for tests).
    func count(_ tenant: Int64) -> Int { running.withLock { $0[tenant, default: 0] } }
}
