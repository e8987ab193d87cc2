import AsyncHTTPClient
@_spi(Wire) @testable import Chronicle
@_spi(Wire) @testable import ChronicleFormat
@testable import ChronicleHub
import ChronicleHTTP
import Foundation
import Logging
import NIOFoundationCompat
import PostgresNIO
import Prometheus
import NIOCore
import NIOHTTP1
import Synchronization
import Testing
import ToolsTestSupport

/// The throwaway PostgreSQL cluster `scripts/with-postgres.sh` starts for the suite.
let testDatabase = ProcessInfo.processInfo.environment["CHRONICLE_TEST_DATABASE"]

/// Whether the hub's tests can run (they need the PostgreSQL server of `scripts/test.sh`).
let hasTestDatabase = testDatabase?.isEmpty == false

/// Hub nodes on loopback against the test database, an operator's handle on it, and helpers.
struct HubFixture: Sendable {
    let admin: HubDatabase
    let urls: [URL]
    /// Where each node serves /healthz and /metrics.
    let operatorURLs: [URL]
    let nodes: [HubNode]

    /// A new tenant of its own (tests run in one database).
    func tenant(maxEvents: Int64? = nil, maxBytes: Int64? = nil) async throws -> String {
        let name = "t-\(UUID().uuidString.prefix(12).lowercased())"
        #expect(try await admin.addTenant(name, maxEvents: maxEvents, maxBytes: maxBytes))
        return name
    }

    func token(_ tenant: String, _ device: String) async throws -> String {
        try await admin.issueToken(tenant: tenant, device: device)
    }

    func peer(node: Int, token: String) -> Peer {
        .http(urls[node], token: token)
    }

    /// The tenant's id (for looking at its rows).
    func tenantID(_ name: String) async throws -> Int64 {
        let rows = try await admin.client.query("SELECT id FROM tenants WHERE name = \(name)")
        for try await id in rows.decode(Int64.self) { return id }
        throw HubRefusal.unknownTenant(name)
    }
}

/// Runs `nodes` hub nodes (each with its own connection pool, as separate processes would
/// have) on free loopback ports against the test database (or `database`), migrated, for `body`.
/// The nodes log in as `nodeDatabase`'s role when given (the operator's handle migrates as `database`'s).
func withHub<R: Sendable>(
    nodes count: Int = 2, database: String? = nil, nodeDatabase: String? = nil, configure: (inout HubNode) -> Void = { _ in },
    _ body: @Sendable (HubFixture) async throws -> R
) async throws -> R {
    let url = try #require(database ?? testDatabase)
    let logger = Logger(label: "chronicle.hub.tests")
    let admin = try HubDatabase(url: url, logger: logger)
    let adminTask = Task { await admin.run() }
    defer { adminTask.cancel() }
    try await admin.migrate()
    let nodes = try (0..<count).map { _ in
        let registry = PrometheusCollectorRegistry()
        var node = HubNode(database: try HubDatabase(url: nodeDatabase ?? url, logger: logger), logger: logger, registry: registry)
        node.metricsText = { registry.emitToBuffer() }
        node.operatorEndpoint = .init(host: "127.0.0.1", port: 0)
        configure(&node)
        return node
    }
    let ports = Watched<[Int: Int]>([:])
    let operatorPorts = Watched<[Int: Int]>([:])
    let tasks = nodes.enumerated().map { index, node in
        Task {
            try await node.run(
                host: "127.0.0.1", port: 0, onRunning: { bound in ports.update { $0[index] = bound } },
                onOperatorRunning: { bound in operatorPorts.update { $0[index] = bound } })
        }
    }
    defer { for task in tasks { task.cancel() } }
    guard await ports.wait(until: { $0.count == count }), await operatorPorts.wait(until: { $0.count == count }) else {
        throw ChronicleError.storeUnavailable(reason: "the hub nodes did not start")
    }
    let urls = (0..<count).map { index in URL(string: "http://127.0.0.1:\(ports.value[index] ?? 0)")! }
    let operatorURLs = (0..<count).map { index in URL(string: "http://127.0.0.1:\(operatorPorts.value[index] ?? 0)")! }
    return try await body(HubFixture(admin: admin, urls: urls, operatorURLs: operatorURLs, nodes: nodes))
}


/// The pushes of `tenant` that node 0 holds (in a turn or waiting for one), as they join: a
/// test waits on it instead of polling the queue. Reset `appendQueue.onHeld` afterwards.
func heldAppends(_ hub: HubFixture, tenant id: Int64) -> Watched<Int> {
    let held = Watched(0)
    hub.nodes[0].database.appendQueue.onHeld.withLock { observer in
        observer = { tenant, count in if tenant == id { held.update { $0 = count } } }
    }
    return held
}

/// The long-polls of `tenant` that node `node` holds, as they start waiting: a test waits on it
/// to know a long-poll is held before it pushes (else the poll finds the event at once and the
/// wake goes untested). Reset `notifier.onWaiting` afterwards.
func heldLongPolls(_ hub: HubFixture, node: Int = 0, tenant id: Int64) -> Watched<Int> {
    let held = Watched(0)
    hub.nodes[node].notifier.onWaiting.withLock { observer in
        observer = { tenant, count in if tenant == id { held.update { $0 = count } } }
    }
    return held
}

/// Runs `body` while a transaction of its own holds the row lock of tenant `id` (appends to the
/// tenant wait for it in PostgreSQL), passing the holding backend's process id; releases the
/// lock when `body` returns or throws.
func whileHoldingRowLock<R: Sendable>(_ hub: HubFixture, tenant id: Int64, _ body: (Int32) async throws -> R) async throws -> R {
    try await whileHolding(hub, ["SELECT id FROM tenants WHERE id = \(id) FOR UPDATE"], body)
}

/// Runs `statements` in a transaction and keeps it open while `body` runs (what they locked,
/// other statements wait for), passing the holding backend's process id; commits when `body`
/// returns, rolls back when it throws.
func whileHolding<R: Sendable>(_ hub: HubFixture, _ statements: [String], _ body: (Int32) async throws -> R) async throws -> R {
    let logger = Logger(label: "hub-tests")
    let (lockedStream, locked) = AsyncStream<Int32>.makeStream()
    let (releaseStream, release) = AsyncStream<Void>.makeStream()
    let holder = Task {
        try await hub.admin.client.withTransaction(logger: logger) { connection in
            for statement in statements { try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
            for try await pid in try await connection.query("SELECT pg_backend_pid()", logger: logger).decode(Int32.self) { locked.yield(pid) }
            for await _ in releaseStream { break }
        }
    }
    var holderPID: Int32 = 0
    for await pid in lockedStream {
        holderPID = pid
        break
    }
    do {
        let result = try await body(holderPID)
        release.finish()
        try await holder.value
        return result
    } catch {
        release.finish()
        _ = try? await holder.value
        throw error
    }
}

/// The ports the nodes bound.
/// Runs `body` with the URL of a new, empty database on the test server, dropped afterwards.
func withEmptyDatabase(_ body: (String) async throws -> Void) async throws {
    let base = try #require(testDatabase)
    let name = "empty_\(UUID().uuidString.prefix(8).lowercased())"
    let url = try #require(URLComponents(string: base))
    let configuration = PostgresConnection.Configuration(
        host: try #require(url.host), port: url.port ?? 5432, username: try #require(url.user), password: nil, database: "postgres", tls: .disable)
    let logger = Logger(label: "test")
    let admin = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
    try await admin.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
    do {
        try await body(base.replacingOccurrences(of: "/postgres", with: "/\(name)"))
    } catch {
        _ = try? await admin.query(PostgresQuery(unsafeSQL: "DROP DATABASE \(name) WITH (FORCE)"), logger: logger)
        try? await admin.close()
        throw error
    }
    try await admin.query(PostgresQuery(unsafeSQL: "DROP DATABASE \(name) WITH (FORCE)"), logger: logger)
    try await admin.close()
}
