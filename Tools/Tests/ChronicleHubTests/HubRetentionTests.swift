@_spi(Wire) @testable import Chronicle
@_spi(Wire) @testable import ChronicleFormat
@testable import ChronicleHub
import ChronicleHTTP
import ChronicleTesting
import Foundation
import PostgresNIO
import Testing
import ToolsTestSupport

/// A tenant's log keeps live values: retention per key and pushing device, trimmed after
/// appends, counted against the quota. Against a real PostgreSQL server.
@Suite(.serialized, .enabled(if: hasTestDatabase, "needs CHRONICLE_TEST_DATABASE: run scripts/test.sh"))
struct HubRetentionTests {
    static let draft = Key<Int>("hub.retention.draft", default: 0, sync: .manual)

    /// The tenant's stored event count, as its quota sees it.
    func events(_ hub: HubFixture, _ tenant: String) async throws -> Int64 {
        try await hub.admin.tenants().first { $0.name == tenant }?.events ?? -1
    }

    /// 20,000 writes of one synced key used to be 20,000 events at the first sync, over a quota
    /// of 5,000 (HTTP 507 at that sync and every one after). A device now sends what the key's
    /// retention keeps.
    @Test func manyWritesOfOneKeyFitAQuota() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant(maxEvents: 5_000)
            let token = try await hub.token(tenant, "phone")
            try await withTemporaryStore { store, _ async throws in
                for round in 0..<20 {
                    try store.write { batch in for value in 1...1_000 { batch[Self.draft] = round * 1_000 + value } }
                }
                let report = try await Replicator(store: store, peers: [hub.peer(node: 0, token: token)]).sync()
                #expect(report.sent <= 100, "sent \(report.sent)")
                #expect(try await events(hub, tenant) <= 100)
            }
        }
    }

    /// A device that writes one synced key all the time and syncs often never reaches the
    /// tenant's quota: the hub trims by itself. A device that pulled before the trims, and a new
    /// one, converge on the current value.
    @Test func aBusyDeviceStaysWithinTheQuota() async throws {
        try await withHub(nodes: 2) { hub in
            let tenant = try await hub.tenant(maxEvents: 600)
            let (busy, old, new) = (try await hub.token(tenant, "busy"), try await hub.token(tenant, "old"), try await hub.token(tenant, "new"))
            try await withTemporaryStores(3) { stores in
                let (writer, early, late) = (stores[0], stores[1], stores[2])
                for round in 0..<12 {
                    for value in 1...150 { try writer.set(round * 1_000 + value, for: Self.draft) }
                    try await Replicator(store: writer, peers: [hub.peer(node: round % 2, token: busy)]).sync()
                    if round == 2 { try await Replicator(store: early, peers: [hub.peer(node: 1, token: old)]).sync() }
                    let bound = Int64(HubDatabase.defaultRetainedRevisions) + Int64(HubDatabase.trimThreshold)
                    // The sync's commit started the node's trim before it answered.
                    for node in hub.nodes { await node.database.trimsFinish() }
                    let stored = try await events(hub, tenant)
                    #expect(stored <= bound, "round \(round): \(stored) events")
                }
                try await Replicator(store: early, peers: [hub.peer(node: 0, token: old)]).sync()
                try await Replicator(store: late, peers: [hub.peer(node: 1, token: new)]).sync()
                #expect(early[Self.draft] == 11_150)
                #expect(late[Self.draft] == 11_150)
                #expect(try late.verify().isSound)
                // The stored counts are the rows there are.
                let id = try await hub.tenantID(tenant)
                var rows: Int64 = -1
                for try await count in try await hub.admin.client.query("SELECT count(*) FROM events WHERE tenant_id = \(id)").decode(Int64.self) {
                    rows = count
                }
                let counted = try await events(hub, tenant)
                #expect(rows == counted)
            }
        }
    }

    /// Devices that keep two revisions a key write, sync through either node with failing
    /// pushes and pulls, compact, and the hub (two revisions a key per device) trims between
    /// steps; after two full rounds every device holds the same values and verifies.
    @Test(arguments: 0..<3)
    func devicesConvergeThroughAHubThatTrims(seed: UInt64) async throws {
        try await withHub(nodes: 2) { hub in
            var random = SeededGenerator(seed: 70 + seed)
            let tenant = try await hub.tenant()
            try await hub.admin.setRetention(tenant: tenant, revisions: 2)
            let id = try await hub.tenantID(tenant)
            var tokens: [String] = []
            for index in 0..<3 { tokens.append(try await hub.token(tenant, "device-\(index)")) }
            let keys = (0..<3).map { Key<Int>("hub.converge.k\($0)", default: -1, sync: .manual) }
            var configuration = Store.Configuration()
            configuration.retention = .revisions(2)
            try await withTemporaryStores(3, configuration: configuration) { stores in
                func peer(_ index: Int, node: Int, failing: [FailingTransport.Failure]) -> Peer {
                    let url = hub.urls[node]
                    return Peer(name: "hub", transport: FailingTransport(HTTPTransport(baseURL: url, token: tokens[index]), failing: failing))
                }
                for _ in 0..<40 {
                    let index = Int.random(in: 0..<3, using: &random)
                    switch Int.random(in: 0..<6, using: &random) {
                    case 0, 1, 2:
                        try stores[index].write { batch in
                            for _ in 0..<Int.random(in: 1...5, using: &random) {
                                batch[keys.randomElement(using: &random)!] = Int.random(in: 0..<1_000, using: &random)
                            }
                        }
                    case 3:
                        _ = try stores[index].applyRetention()
                    case 4:
                        _ = try await hub.admin.trim(tenant: id)
                    default:
                        let failing: [FailingTransport.Failure] =
                            switch Int.random(in: 0..<3, using: &random) {
                            case 0: [.pushAfterDelivery(1)]
                            case 1: [.pull(1)]
                            default: []
                            }
                        _ = try? await Replicator(store: stores[index], peers: [peer(index, node: Int.random(in: 0..<2, using: &random), failing: failing)]).sync()
                    }
                }
                for _ in 0..<2 {
                    for index in 0..<3 {
                        try await Replicator(store: stores[index], peers: [peer(index, node: index % 2, failing: [])]).sync()
                    }
                }
                for key in keys {
                    let values = stores.map { $0[key] }
                    #expect(Set(values).count == 1, "seed \(seed): \(key.name) differs: \(values)")
                }
                for store in stores { #expect(try store.verify().isSound) }
            }
        }
    }

    /// Revisions are counted per pushing device: a token that pushes a key many times never
    /// evicts another device's revision of it. `retention` sets the tenant's count and trims.
    @Test func oneDevicesPushesNeverEvictAnothers() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let (quiet, noisy) = (try await hub.token(tenant, "quiet"), try await hub.token(tenant, "noisy"))
            try await hub.admin.setRetention(tenant: tenant, revisions: 3)
            try await withTemporaryStores(2) { stores in
                let other = Key<Int>("hub.retention.other", default: 0, sync: .manual)
                try stores[0].set(7, for: other)
                try stores[0].set(1, for: Self.draft)
                try await Replicator(store: stores[0], peers: [hub.peer(node: 0, token: quiet)]).sync()
                for value in 2...60 { try stores[1].set(value, for: Self.draft) }
                try await Replicator(store: stores[1], peers: [hub.peer(node: 0, token: noisy)]).sync()
                _ = try await hub.admin.trim(tenant: try await hub.tenantID(tenant))
                let id = try await hub.tenantID(tenant)
                var byDevice: [String: Int64] = [:]
                for try await (device, count) in try await hub.admin.client.query(
                    "SELECT device, count(*) FROM events WHERE tenant_id = \(id) GROUP BY device"
                ).decode((String, Int64).self) { byDevice[device] = count }
                #expect(byDevice == ["quiet": 2, "noisy": 3])
            }
        }
    }
}
