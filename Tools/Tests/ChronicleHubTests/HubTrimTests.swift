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

    /// Two trims of one tenant at once (two nodes, or a node's and `hub tenant retention`), on a
    /// key with more rows to delete than one statement deletes: whatever the interleaving, the
    /// key ends with what retention keeps, and no mark of it is cleared while rows remain.
    @Test(arguments: 0..<3)
    func twoTrimsAtOnceLeaveNothingRetentionDrops(round: Int) async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            try await hub.admin.setRetention(tenant: tenant, revisions: 10)
            let id = try await hub.tenantID(tenant)
            try await Self.insert(hub, tenant: id, rows: 5_000)
            let other = try HubDatabase(url: try #require(testDatabase))
            let pool = Task { await other.run() }
            defer { pool.cancel() }
            async let first = hub.admin.trim(tenant: id, keysPerStep: 1 + round)
            async let second = other.trim(tenant: id)
            let (a, b) = try await (first, second)
            var rows: Int64 = -1
            for try await count in try await hub.admin.client.query("SELECT count(*) FROM events WHERE tenant_id = \(id)").decode(Int64.self) {
                rows = count
            }
            #expect(rows == 10, "\(rows) rows left; the trims: \(a); \(b)")
            #expect(a.deleted + b.deleted == 4_990)
            #expect(try await hub.admin.tenant(named: tenant).summary.events == 10)
        }
    }

    /// A trim that waited on another's deletions (another node's trim step, still open) finds
    /// the rows it chose gone: it must go on with what is left, not take the key for done.
    @Test func aTrimThatWaitedOnAnothersDeletionsFinishesTheKey() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            try await hub.admin.setRetention(tenant: tenant, revisions: 10)
            let id = try await hub.tenantID(tenant)
            try await Self.insert(hub, tenant: id, rows: 5_000)
            let trim = try await whileHolding(
                hub,
                [
                    "DELETE FROM events WHERE tenant_id = \(id) AND position <= 4096",
                    "UPDATE tenants SET event_count = event_count - 4096 WHERE id = \(id)",
                ]
            ) { holder in
                let trim = Task { try await hub.admin.trim(tenant: id) }
                // Until the trim waits in PostgreSQL on what the other step holds.
                var waiting = false
                for _ in 0..<3_000 where !waiting {
                    for try await count in try await hub.admin.client.query(
                        "SELECT count(*) FROM pg_stat_activity WHERE \(holder) = ANY(pg_blocking_pids(pid))"
                    ).decode(Int64.self) { waiting = count > 0 }
                    if !waiting { try await Task.sleep(for: .milliseconds(10)) }
                }
                #expect(waiting, "the trim never waited on the other step")
                return trim
            }
            let done = try await trim.value
            var rows: Int64 = -1
            for try await count in try await hub.admin.client.query("SELECT count(*) FROM events WHERE tenant_id = \(id)").decode(Int64.self) {
                rows = count
            }
            #expect(rows == 10, "\(rows) rows left after \(done)")
            #expect(try await hub.admin.tenant(named: tenant).summary.events == 10)
        }
    }

    /// `rows` revisions of the key "hot" stored by one device, the tenant's head and counts set
    /// to them, and the key marked for the next trim.
    static func insert(_ hub: HubFixture, tenant id: Int64, rows: Int) async throws {
        try await hub.admin.client.query(
            """
            INSERT INTO events (tenant_id, position, writer, counter, policy, payload_size, body, chain, key, hlc, device)
            SELECT \(id), g, decode('00112233445566778899aabbccddeeff', 'hex'), g, 1, 32, sha256(int8send(g)), sha256(int8send(g)),
                convert_to('hot', 'UTF8'), g, 'phone'
            FROM generate_series(1, \(rows)) g
            """)
        try await hub.admin.client.query("UPDATE tenants SET head = \(rows), event_count = \(rows) WHERE id = \(id)")
        try await hub.admin.client.query("INSERT INTO trim_pending (tenant_id, key) VALUES (\(id), convert_to('hot', 'UTF8'))")
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
