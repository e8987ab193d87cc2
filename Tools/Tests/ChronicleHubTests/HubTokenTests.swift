@_spi(Wire) @testable import Chronicle
@_spi(Wire) @testable import ChronicleFormat
@testable import ChronicleHub
import ChronicleTesting
import Foundation
import Logging
import PostgresNIO
import NIOHTTP1
import Testing
import ToolsTestSupport

/// Tokens a node has already served: revoking one refuses it at once on every route.
extension HubTests {
@Suite struct HubTokenTests {
    /// A device's token served info, pulls and a push on a node; once revoked it gets 401 on
    /// each of them there, and the same device's new token works.
    @Test func aRevokedTokenIsRefusedOnEveryRouteOfANodeThatServedIt() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "phone")
            let url = hub.urls[0]
            let info = url.appendingPathComponent("v1/info")
            let range = url.appendingPathComponent("v1/range").appending(queryItems: [.init(name: "after", value: "0")])
            let poll = url.appendingPathComponent("v1/range").appending(queryItems: [.init(name: "after", value: "99"), .init(name: "wait", value: "1")])
            let push = url.appendingPathComponent("v1/range")
            try await withTemporaryStores(1) { stores in
                try stores[0].set("before", for: .hubNote)
                let body = try stores[0].exportRange(after: 0)
                #expect(try await rawRequest(info, token: token).status == 200)
                #expect(try await rawRequest(range, token: token).status == 200)
                #expect(try await rawRequest(push, method: .POST, token: token, body: body).status == 200)
                #expect(try await rawRequest(poll, token: token).status == 200)

                #expect(try await hub.admin.revokeToken(tenant: tenant, device: "phone"))
                for (what, response) in [
                    ("info", try await rawRequest(info, token: token)),
                    ("pull", try await rawRequest(range, token: token)),
                    ("long-poll", try await rawRequest(poll, token: token)),
                    ("push", try await rawRequest(push, method: .POST, token: token, body: body)),
                ] {
                    #expect(response.status == 401, "\(what) with a revoked token: \(response.status)")
                    #expect(response.body.contains("revoked bearer token"), "\(what): \(response.body)")
                }
                let renewed = try await hub.token(tenant, "phone")
                #expect(try await rawRequest(range, token: renewed).status == 200)
                #expect(try await rawRequest(info, token: token).status == 401, "the old token stays refused")
            }
        }
    }

    /// A push already waiting in PostgreSQL for its tenant's row lock when its token is
    /// revoked: refused once it gets the lock (the token is checked in a snapshot taken after
    /// the lock, not in the one the waiting statement began with).
    @Test func aPushWaitingForTheRowLockWhenItsTokenIsRevokedIsRefused() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "phone")
            let id = try await hub.tenantID(tenant)
            try await withTemporaryStores(1) { stores in
                try stores[0].set("after the revocation", for: .hubNote)
                let body = try stores[0].exportRange(after: 0)
                #expect(try await rawRequest(hub.urls[0].appendingPathComponent("v1/info"), token: token).status == 200)
                let push = try await whileHoldingRowLock(hub, tenant: id) { holder in
                    let push = Task { try await rawRequest(hub.urls[0].appendingPathComponent("v1/range"), method: .POST, token: token, body: body) }
                    // Until the push's statement waits in PostgreSQL on the lock this holds.
                    var waiting = false
                    for _ in 0..<3_000 where !waiting {
                        for try await count in try await hub.admin.client.query(
                            "SELECT count(*) FROM pg_stat_activity WHERE \(holder) = ANY(pg_blocking_pids(pid))"
                        ).decode(Int64.self) { waiting = count > 0 }
                        if !waiting { try await Task.sleep(for: .milliseconds(10)) }
                    }
                    #expect(waiting, "the push never waited on the row lock")
                    #expect(try await hub.admin.revokeToken(tenant: tenant, device: "phone"))
                    return push
                }
                let response = try await push.value
                #expect(response.status == 401, "a push revoked while it waited for the lock: \(response.status)")
                #expect(try await hub.admin.tenants().first { $0.name == tenant }?.events == 0)
            }
        }
    }
}
}
