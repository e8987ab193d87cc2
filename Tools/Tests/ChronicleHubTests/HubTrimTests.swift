@_spi(Wire) @testable import Chronicle
@_spi(Wire) @testable import ChronicleFormat
@testable import ChronicleHub
import ChronicleHTTP
import ChronicleTesting
import Foundation
import PostgresNIO
import Synchronization
import Testing
import ToolsTestSupport

/// What a trim of a tenant's log reads: the keys appended (or vouched for) since the last trim,
/// not the whole tenant; a change of retention and a tenant stored before trims were incremental
/// go through every key in bounded steps. Counted in rows and keys, against a real PostgreSQL.
@Suite(.serialized, .enabled(if: hasTestDatabase, "needs CHRONICLE_TEST_DATABASE: run scripts/test.sh"))
struct HubTrimTests {
    static let keys = (0..<40).map { Key<Int>("hub.trim.k\($0)", default: 0, sync: .manual) }

    /// The rows the tenant stores of `key` (its name as the hub keys it).
    func rows(_ hub: HubFixture, tenant id: Int64, of key: String) async throws -> Int64 {
        var count: Int64 = -1
        for try await found in try await hub.admin.client.query(
            "SELECT count(*) FROM events WHERE tenant_id = \(id) AND position(convert_to(\(key), 'UTF8') IN key) > 0"
        ).decode(Int64.self) { count = found }
        return count
    }

    /// A device writes 40 keys and syncs; then writes one of them five times and syncs. The
    /// second trim reads that key's rows, not the tenant's 45: a trim costs what was appended.
    @Test func aTrimReadsOnlyTheKeysAppendedSinceTheLast() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "phone")
            try await hub.admin.setRetention(tenant: tenant, revisions: 2)
            let id = try await hub.tenantID(tenant)
            try await withTemporaryStore { store, _ async throws in
                try store.write { batch in for (index, key) in Self.keys.enumerated() { batch[key] = index } }
                try await Replicator(store: store, peers: [hub.peer(node: 0, token: token)]).sync()
                let first = try await hub.admin.trim(tenant: id)
                #expect(first.keys == 40 && first.rowsRead == 40 && first.deleted == 0, "\(first)")

                for value in 1...5 { try store.set(100 + value, for: Self.keys[7]) }
                try await Replicator(store: store, peers: [hub.peer(node: 0, token: token)]).sync()
                let stored = try await rows(hub, tenant: id, of: "hub.trim.k7")
                let second = try await hub.admin.trim(tenant: id)
                #expect(second.keys == 1, "\(second)")
                #expect(Int64(second.rowsRead) == stored, "read \(second.rowsRead) rows; the key has \(stored)")
                #expect(try await rows(hub, tenant: id, of: "hub.trim.k7") == 2)
                let third = try await hub.admin.trim(tenant: id)
                #expect(third.keys == 0 && third.rowsRead == 0, "nothing appended since: \(third)")
            }
        }
    }

    /// Lowering a tenant's retention trims every key, in steps of a bounded number of keys, and
    /// reports each step.
    @Test func loweringRetentionTrimsEveryKeyInBoundedSteps() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "phone")
            try await hub.admin.setRetention(tenant: tenant, revisions: 0)
            let id = try await hub.tenantID(tenant)
            try await withTemporaryStore(configuration: forever) { store, _ async throws in
                for round in 0..<3 {
                    try store.write { batch in for (index, key) in Self.keys.enumerated() { batch[key] = round * 100 + index } }
                }
                try await Replicator(store: store, peers: [hub.peer(node: 0, token: token)]).sync()
                _ = try await hub.admin.trim(tenant: id)
                #expect(try await hub.admin.tenant(named: tenant).summary.events == 120)

                let steps = StepLog()
                let trim = try await hub.admin.setRetention(tenant: tenant, revisions: 1, keysPerStep: 8) { steps.append($0) }
                #expect(trim.keys == 40 && trim.deleted == 80, "\(trim)")
                #expect(try await hub.admin.tenant(named: tenant).summary.events == 40)
                let recorded = steps.all
                #expect(recorded.count >= 5, "\(recorded.count) steps")
                #expect(recorded.allSatisfy { $0.stepKeys <= 8 }, "\(recorded)")
                #expect(recorded.last?.keys == 40)
            }
        }
    }

    /// A tenant whose rows were stored before trims followed appends (the migration marks every
    /// tenant to be swept): its first trim goes through every key, in steps, and trims them.
    @Test func aTenantStoredBeforeIncrementalTrimsIsSweptOnce() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "phone")
            try await hub.admin.setRetention(tenant: tenant, revisions: 0)
            let id = try await hub.tenantID(tenant)
            try await withTemporaryStore(configuration: forever) { store, _ async throws in
                for round in 0..<2 {
                    try store.write { batch in for (index, key) in Self.keys.enumerated() { batch[key] = round * 100 + index } }
                }
                try await Replicator(store: store, peers: [hub.peer(node: 0, token: token)]).sync()
                // As the migration leaves a tenant it found: nothing marked, the sweep due.
                try await hub.admin.client.query("DELETE FROM trim_pending WHERE tenant_id = \(id)")
                try await hub.admin.client.query("UPDATE tenants SET retain_revisions = 1, sweep_from = ''::bytea WHERE id = \(id)")
                let trim = try await hub.admin.trim(tenant: id, keysPerStep: 16)
                #expect(trim.keys == 40 && trim.deleted == 40, "\(trim)")
                #expect(try await hub.admin.tenant(named: tenant).summary.events == 40)
                let again = try await hub.admin.trim(tenant: id)
                #expect(again.keys == 0, "the sweep is done: \(again)")
            }
        }
    }

    var forever: Store.Configuration {
        var configuration = Store.Configuration()
        configuration.retention = .forever
        return configuration
    }
}

/// The progress a trim reported, step by step.
final class StepLog: Sendable {
    let steps = Mutex<[HubTrim]>([])
    func append(_ step: HubTrim) { steps.withLock { $0.append(step) } }
    var all: [HubTrim] { steps.withLock { $0 } }
}
