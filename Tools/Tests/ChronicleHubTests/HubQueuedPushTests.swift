@_spi(Wire) @testable import Chronicle
@_spi(Wire) @testable import ChronicleFormat
@testable import ChronicleHub
import AsyncHTTPClient
import ChronicleTesting
import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import PostgresNIO
import Synchronization
import Testing
import ToolsTestSupport

/// Pushes of one tenant that queue on a node while its log is busy: each is its own request,
/// with its own receipt or refusal, however the node commits them.
extension HubTests {
@Suite struct HubQueuedPushTests {
    /// Holds the tenant's row lock while `pushes` (bodies with their tokens) are sent to node 0,
    /// until the node holds all of them (waiting in its queue, or in the transaction of the
    /// push whose turn it is); then lets them through. Returns each
    /// push's status and body, in the order given.
    static func queuedPushes(
        _ hub: HubFixture, tenant: String, _ pushes: [(token: String, body: Data)], whileQueued: () async throws -> Void = {}
    ) async throws -> [RawResponse] {
        let id = try await hub.tenantID(tenant)
        let url = hub.urls[0].appendingPathComponent("v1/range").absoluteString
        // A client of their own: HTTPClient.shared opens at most 8 connections to a host.
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        defer { _ = client.shutdown() }
        let held = heldAppends(hub, tenant: id)
        defer { hub.nodes[0].database.appendQueue.onHeld.withLock { $0 = nil } }
        let requests = try await whileHoldingRowLock(hub, tenant: id) { _ in
            let requests = pushes.map { push in
                Task {
                    var request = HTTPClientRequest(url: url)
                    request.method = .POST
                    request.headers.add(name: "Authorization", value: "Bearer \(push.token)")
                    request.body = .bytes(ByteBuffer(bytes: push.body))
                    let response = try await client.execute(request, timeout: requestHangGuard)
                    return RawResponse(status: Int(response.status.code), data: Data(buffer: try await response.body.collect(upTo: 1 << 20)))
                }
            }
            // The first push waits on the row lock; every other one in the node's queue, or in
            // the first one's transaction when it arrived before the first took its batch.
            #expect(await held.wait(until: { $0 >= pushes.count }), "the pushes did not queue")
            #expect(hub.nodes[0].database.appendQueue.held(id) == pushes.count, "the pushes did not queue")
            try await whileQueued()
            return requests
        }
        var responses: [RawResponse] = []
        for request in requests { responses.append(try await request.value) }
        return responses
    }

    /// `count` events of a new writer, as a range a device pushes.
    static func range(of store: Store, events count: Int, prefix: String) throws -> Data {
        for i in 0..<count { try store.set(i, for: Key<Int>("\(prefix).k\(i)", default: 0, sync: .automaticSmall)) }
        return try store.exportRange(after: 0)
    }

    /// Twelve devices' pushes (and a thirteenth re-sending one of them) queued at once: each
    /// gets its own receipt, every event is stored once at a dense position, each device's
    /// `pushed` count is its own, and a new device pulls all of them through the chain checks.
    @Test func queuedPushesEachGetTheirOwnReceiptAndLandOnce() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let devices = 12
            var tokens: [String] = []
            for index in 0...devices { tokens.append(try await hub.token(tenant, "d\(index)")) }
            try await withTemporaryStores(devices + 1) { stores in
                var bodies = try (0..<devices).map { try Self.range(of: stores[$0], events: 10, prefix: "queued.d\($0)") }
                bodies.append(bodies[3])  // the same identities and bytes again, from another device
                let responses = try await Self.queuedPushes(hub, tenant: tenant, Array(zip(tokens, bodies)))
                var receipts: [RangeReceipt] = []
                for response in responses {
                    #expect(response.status == 200, "\(response.body)")
                    receipts.append(try JSONDecoder().decode(RangeReceipt.self, from: response.data))
                }
                for receipt in receipts {
                    #expect(receipt.received == 10)
                    #expect(receipt.applied + receipt.duplicates == 10)
                }
                #expect(receipts.map(\.applied).reduce(0, +) == devices * 10)
                #expect(receipts.map(\.duplicates).reduce(0, +) == 10, "the re-sent range is all duplicates")

                let id = try await hub.tenantID(tenant)
                for try await (count, head, distinct) in try await hub.admin.client.query(
                    "SELECT count(*), max(position), count(DISTINCT position) FROM events WHERE tenant_id = \(id)"
                ).decode((Int64, Int64, Int64).self) {
                    #expect(count == Int64(devices * 10))
                    #expect(head == Int64(devices * 10), "positions are dense")
                    #expect(distinct == count)
                }
                let listed = try await hub.admin.tenants().first { $0.name == tenant }
                #expect(listed?.events == Int64(devices * 10))
                for try await (name, pushed) in try await hub.admin.client.query(
                    "SELECT name, pushed FROM devices WHERE tenant_id = \(id)"
                ).decode((String, Int64).self) {
                    let index = try #require(Int(name.dropFirst()))
                    #expect(pushed == Int64(receipts[index].applied), "device \(name)")
                }

                let reader = stores[devices]
                let readerToken = try await hub.token(tenant, "reader")
                try await Replicator(store: reader, peers: [hub.peer(node: 0, token: readerToken)]).sync()
                #expect(try reader.logEntries().count == devices * 10)
                #expect(reader[Key<Int>("queued.d11.k9", default: 0, sync: .automaticSmall)] == 9)
            }
        }
    }

    /// A tenant with room for three pushes of ten: of five queued at once, three land whole and
    /// two are refused whole; the refusals stop no other push.
    @Test func aRefusedPushAmongQueuedOnesTakesNothingAndStopsNoOther() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant(maxEvents: 30)
            var tokens: [String] = []
            for index in 0..<5 { tokens.append(try await hub.token(tenant, "d\(index)")) }
            try await withTemporaryStores(5) { stores in
                let bodies = try (0..<5).map { try Self.range(of: stores[$0], events: 10, prefix: "quota.d\($0)") }
                let responses = try await Self.queuedPushes(hub, tenant: tenant, Array(zip(tokens, bodies)))
                #expect(responses.filter { $0.status == 200 }.count == 3)
                #expect(responses.filter { $0.status == 507 }.count == 2)
                for refused in responses where refused.status == 507 { #expect(refused.body.contains("quota of 30 events")) }
                for accepted in responses where accepted.status == 200 {
                    #expect(try JSONDecoder().decode(RangeReceipt.self, from: accepted.data).applied == 10)
                }
                let listed = try await hub.admin.tenants().first { $0.name == tenant }
                #expect(listed?.events == 30)
            }
        }
    }

    /// A body that is not a range, queued among good pushes: 400 for it, the others land.
    @Test func aMalformedPushAmongQueuedOnesIsRefusedAlone() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "d")
            try await withTemporaryStores(4) { stores in
                var pushes = try (0..<4).map { (token: token, body: try Self.range(of: stores[$0], events: 5, prefix: "bad.d\($0)")) }
                pushes.insert((token: token, body: Data("nonsense".utf8)), at: 2)
                pushes.append((token: token, body: Data("not a range either".utf8)))
                let responses = try await Self.queuedPushes(hub, tenant: tenant, pushes)
                #expect(responses.map(\.status) == [200, 200, 400, 200, 200, 400])
                let listed = try await hub.admin.tenants().first { $0.name == tenant }
                #expect(listed?.events == 20)
            }
        }
    }

    /// Two queued pushes bring the same wrapped key, each with an event naming it: the key is
    /// stored once, and counted in one receipt.
    @Test func aWrappedKeyInTwoQueuedPushesIsStoredOnce() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let (one, two) = (try await hub.token(tenant, "one"), try await hub.token(tenant, "two"))
            let record = junkWrappedKey()
            let responses = try await Self.queuedPushes(hub, tenant: tenant, [
                (token: one, body: handMadeRange(keys: [record], events: [eventNaming(record)])),
                (token: two, body: handMadeRange(keys: [record], events: [eventNaming(record)])),
            ])
            #expect(responses.map(\.status) == [200, 200])
            let receipts = try responses.map { try JSONDecoder().decode(RangeReceipt.self, from: $0.data) }
            #expect(receipts.map(\.keys).reduce(0, +) == 1)
            #expect(receipts.map(\.applied) == [1, 1])
            let id = try await hub.tenantID(tenant)
            for try await count in try await hub.admin.client.query("SELECT count(*) FROM wrapped_keys WHERE tenant_id = \(id)").decode(Int64.self) {
                #expect(count == 1)
            }
        }
    }

    /// A device revoked while its push waits in the queue: 401 for it, the others land.
    @Test func aPushWhoseTokenIsRevokedWhileQueuedIsRefused() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            var tokens: [String] = []
            for index in 0..<3 { tokens.append(try await hub.token(tenant, "d\(index)")) }
            try await withTemporaryStores(3) { stores in
                let bodies = try (0..<3).map { try Self.range(of: stores[$0], events: 5, prefix: "revoked.d\($0)") }
                let responses = try await Self.queuedPushes(hub, tenant: tenant, Array(zip(tokens, bodies))) { () async throws in
                    let revoked = try await hub.admin.revokeToken(tenant: tenant, device: "d1")
                    #expect(revoked)
                }
                #expect(responses.map(\.status) == [200, 401, 200])
                #expect(responses[1].body.contains("revoked bearer token"))
                let listed = try await hub.admin.tenants().first { $0.name == tenant }
                #expect(listed?.events == 10)
            }
        }
    }
}
}
