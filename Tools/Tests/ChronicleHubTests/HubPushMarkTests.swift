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
                _ = try await transport.push(try store.exportRange(after: 0, maxEvents: 10))
                #expect(try await mark(transport, of: store, filter: .automaticSmall(maxPayload: 4096)) == 0, "a push that names no filter moves no mark")
            }
        }
    }

    /// A token holder naming many logs keeps at most 16 marks, its newest: it cannot grow the
    /// hub's table, and it evicts only its own device's marks.
    @Test func aDeviceKeepsAtMostItsNewestSixteenMarks() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let transport = HTTPTransport(baseURL: hub.urls[0], token: try await hub.token(tenant, "carrier"))
            let neighbour = HTTPTransport(baseURL: hub.urls[0], token: try await hub.token(tenant, "neighbour"))
            try await withTemporaryStores(21) { stores in
                try stores[20].set(1, for: Key<Int>("mark.neighbour", default: 0, sync: .manual))
                _ = try await neighbour.push(try stores[20].exportRange(after: 0), filter: .syncable)
                for (index, store) in stores.prefix(20).enumerated() {
                    try store.set(index, for: Key<Int>("mark.many", default: -1, sync: .manual))
                    _ = try await transport.push(try store.exportRange(after: 0), filter: .syncable)
                }
                let marks = try #require(try await transport.info().pushMarks)
                #expect(marks.count == 16)
                #expect(try await mark(transport, of: stores[19]) == 1, "the newest are kept")
                #expect(try await mark(transport, of: stores[0]) == 0, "the oldest are evicted")
                #expect(try await mark(neighbour, of: stores[20]) == 1, "another device's marks stay")
                let id = try await hub.tenantID(tenant)
                let rows = try await hub.admin.client.query("SELECT count(*) FROM push_marks WHERE tenant_id = \(id)")
                for try await count in rows.decode(Int64.self) { #expect(count == 17) }
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
