import AsyncHTTPClient
@_spi(Wire) @testable import Chronicle
import ChronicleHTTP
@testable import ChronicleHub
import ChronicleTesting
import Foundation
import NIOHTTP1
import PostgresNIO
import Testing
import ToolsTestSupport

/// The hub's push marks: how far it holds what a device pushed of each of its logs, per filter.
/// A mark moves only without a gap, a device keeps a bounded number of them, and a push names its
/// filter or is refused when the name is not one. Against a real PostgreSQL.
@Suite(.enabled(if: hasTestDatabase, "needs CHRONICLE_TEST_DATABASE: run scripts/test.sh"))
struct HubPushMarkTests {
    /// The device's mark for `store`'s log and `filter`, as `info` names it.
    func mark(_ transport: HTTPTransport, of store: Store, filter: RangeFilter = .syncable) async throws -> UInt64? {
        let local = try store.replicaInfo()
        return try await transport.info().pushMark(of: local.replicaID, epoch: local.epoch, filter: filter)
    }

    /// Pushes that follow each other move the mark; one that starts past it (a gap, as a device
    /// pushing from a checkpoint the hub no longer reaches) moves nothing; each filter has its own.
    @Test func aMarkMovesOnlyWithoutAGap() async throws {
        try await withHub(nodes: 1) { hub in
            try await withTemporaryStore { store, _ in
                let transport = HTTPTransport(baseURL: hub.urls[0], token: try await hub.token(try await hub.tenant(), "laptop"))
                for index in 0..<10 { try store.set(index, for: Key<Int>("mark.\(index)", default: -1, sync: .manual)) }
                #expect(try await mark(transport, of: store) == 0, "nothing pushed yet")

                _ = try await transport.push(try store.exportRange(after: 0, maxEvents: 4), filter: .syncable)
                #expect(try await mark(transport, of: store) == 4)
                _ = try await transport.push(try store.exportRange(after: 4, maxEvents: 2), filter: .syncable)
                #expect(try await mark(transport, of: store) == 6)
                _ = try await transport.push(try store.exportRange(after: 8, maxEvents: 2), filter: .syncable)
                #expect(try await mark(transport, of: store) == 6, "a push past the mark leaves a gap: the mark stays")
                _ = try await transport.push(try store.exportRange(after: 3, maxEvents: 10), filter: .syncable)
                #expect(try await mark(transport, of: store) == 10, "a push from before the mark fills the gap")

                #expect(try await mark(transport, of: store, filter: .automaticSmall(maxPayload: 4096)) == 0, "another filter, another mark")
                _ = try await transport.push(try store.exportRange(after: 3, maxEvents: 2), filter: .automaticSmall(maxPayload: 4096))
                #expect(
                    try await mark(transport, of: store, filter: .automaticSmall(maxPayload: 4096)) == 0,
                    "a first push that does not start at 0 proves nothing before it")
                _ = try await transport.push(try store.exportRange(after: 0, maxEvents: 10))
                #expect(try await mark(transport, of: store, filter: .automaticSmall(maxPayload: 4096)) == 0, "a push that names no filter moves no mark")
            }
        }
    }

    /// A device that pulls and has nothing of its own to push still moves its mark over what it
    /// pulled (an empty push), so its next sync pushes nothing back: no duplicate bodies, and no
    /// vouching for other devices' revisions (which would make it keep them in retention).
    @Test func whatADevicePulledIsNotPushedBack() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let (writerToken, readerToken) = (try await hub.token(tenant, "writer"), try await hub.token(tenant, "reader"))
            try await withTemporaryStores(2) { stores in
                let (writer, reader) = (stores[0], stores[1])
                for round in 0..<2 {
                    for index in 0..<5 { try writer.set(round, for: Key<Int>("pulled.\(index)", default: -1, sync: .manual)) }
                    try await Replicator(store: writer, peers: [hub.peer(node: 0, token: writerToken)]).sync()
                    let pulling = try await Replicator(store: reader, peers: [hub.peer(node: 0, token: readerToken)]).sync()
                    #expect(pulling.sent == 0 && pulling.peers.first?.pulled.applied == 5)
                    let idle = try await Replicator(store: reader, peers: [hub.peer(node: 0, token: readerToken)]).sync()
                    #expect(idle.sent == 0, "round \(round): the reader pushed back \(idle.sent) events it had pulled")
                }
                let id = try await hub.tenantID(tenant)
                let rows = try await hub.admin.client.query("SELECT count(*) FROM events WHERE tenant_id = \(id) AND cardinality(also_pushed_by) > 0")
                for try await vouched in rows.decode(Int64.self) { #expect(vouched == 0) }
            }
        }
    }

    /// A device that only pulled moves its mark without waiting for the tenant's appends (a
    /// transaction holding the tenant's row lock) and without meeting a quota the tenant is over.
    @Test func aPushThatCarriesNothingTakesNoTurnAndMeetsNoQuota() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let (writerToken, readerToken) = (try await hub.token(tenant, "writer"), try await hub.token(tenant, "reader"))
            try await withTemporaryStores(2) { stores in
                let (writer, reader) = (stores[0], stores[1])
                for index in 0..<5 { try writer.set(index, for: Key<Int>("carries.\(index)", default: -1, sync: .manual)) }
                try await Replicator(store: writer, peers: [hub.peer(node: 0, token: writerToken)]).sync()
                try await hub.admin.setQuota(tenant: tenant, maxEvents: 2, maxBytes: nil)
                let id = try await hub.tenantID(tenant)
                let report = try await whileHoldingRowLock(hub, tenant: id) { _ in
                    try await Replicator(store: reader, peers: [hub.peer(node: 0, token: readerToken)]).sync()
                }
                #expect(report.sent == 0 && report.peers.first?.pulled.applied == 5)
                #expect(try await mark(HTTPTransport(baseURL: hub.urls[0], token: readerToken), of: reader) == 5)
            }
        }
    }

    /// A token holder naming many logs keeps at most `PushMarks.maxPerDevice` marks, its
    /// newest: it cannot grow the hub's table, and it evicts only its own device's marks. A log's
    /// mark of an older epoch goes first.
    @Test func aDeviceKeepsAtMostItsNewestMarks() async throws {
        let cap = PushMarks.maxPerDevice
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let transport = HTTPTransport(baseURL: hub.urls[0], token: try await hub.token(tenant, "carrier"))
            let neighbour = HTTPTransport(baseURL: hub.urls[0], token: try await hub.token(tenant, "neighbour"))
            try await withTemporaryStores(cap + 5) { stores in
                let other = stores[cap + 4]
                try other.set(1, for: Key<Int>("mark.neighbour", default: 0, sync: .manual))
                _ = try await neighbour.push(try other.exportRange(after: 0), filter: .syncable)
                for (index, store) in stores.prefix(cap + 4).enumerated() {
                    try store.set(index, for: Key<Int>("mark.many", default: -1, sync: .manual))
                    _ = try await transport.push(try store.exportRange(after: 0), filter: .syncable)
                }
                let marks = try #require(try await transport.info().pushMarks)
                #expect(marks.count == cap)
                #expect(try await mark(transport, of: stores[cap + 3]) == 1, "the newest are kept")
                #expect(try await mark(transport, of: stores[0]) == 0, "the oldest are evicted")
                #expect(try await mark(neighbour, of: other) == 1, "another device's marks stay")
                let id = try await hub.tenantID(tenant)
                let rows = try await hub.admin.client.query("SELECT count(*) FROM push_marks WHERE tenant_id = \(id)")
                for try await count in rows.decode(Int64.self) { #expect(count == Int64(cap + 1)) }
            }
        }
    }

    /// A filter the hub cannot read is refused with 400, and nothing of the push is appended.
    @Test func aPushNamingAnUnknownFilterIsRefused() async throws {
        try await withHub(nodes: 1) { hub in
            try await withTemporaryStore { store, _ in
                let token = try await hub.token(try await hub.tenant(), "laptop")
                let transport = HTTPTransport(baseURL: hub.urls[0], token: token)
                try store.set(1, for: Key<Int>("mark.refused", default: 0, sync: .manual))
                let url = hub.urls[0].appendingPathComponent("v1/range").absoluteString + "?filter=everything"
                let response = try await rawRequest(
                    try #require(URL(string: url)), method: .POST, token: token, body: try store.exportRange(after: 0))
                #expect(response.status == 400, "\(response.body)")
                #expect(try await transport.info().head == 0)
            }
        }
    }
}
