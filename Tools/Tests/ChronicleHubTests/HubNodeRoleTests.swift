@_spi(Wire) @testable import Chronicle
import ChronicleHTTP
@testable import ChronicleHub
import ChronicleTesting
import Foundation
import Logging
import PostgresNIO
import Testing
import ToolsTestSupport

/// A node that logs in as a role of its own, with the grants the runbook (docs/HUB.md,
/// "Privileges") gives it and no ownership: it serves pushes, pulls, long-polls, trims and
/// revocations of tables that `migrate`, run as the owner, created after the grants. Against a
/// real PostgreSQL.
@Suite(.serialized, .enabled(if: hasTestDatabase, "needs CHRONICLE_TEST_DATABASE: run scripts/test.sh"))
struct HubNodeRoleTests {
    /// The runbook's statements, for `role`, run as the owner before `migrate`.
    static func runbookGrants(to role: String) -> [String] {
        [
            "CREATE ROLE \(role) LOGIN",
            "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO \(role)",
            "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE ON SEQUENCES TO \(role)",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO \(role)",
            "GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO \(role)",
        ]
    }

    /// Runs `statements` on `url` as its user, one at a time.
    static func run(_ statements: [String], on url: String) async throws {
        let components = try #require(URLComponents(string: url))
        let configuration = PostgresConnection.Configuration(
            host: try #require(components.host), port: components.port ?? 5432, username: try #require(components.user), password: nil,
            database: String(components.path.dropFirst()), tls: .disable)
        let logger = Logger(label: "test")
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        defer { Task { try? await connection.close() } }
        for statement in statements { try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
    }

    @Test func aNodeWithTheRunbooksGrantsAndNoOwnershipServes() async throws {
        let base = try #require(testDatabase)
        let role = "node_\(UUID().uuidString.prefix(8).lowercased())"
        let owner = try #require(URLComponents(string: base)?.user)
        do {
            try await withEmptyDatabase { url in
                try await Self.run(Self.runbookGrants(to: role), on: url)
                let nodeURL = url.replacingOccurrences(of: "//\(owner)@", with: "//\(role)@")
                try await withTemporaryStores(2) { stores in
                    try await withHub(nodes: 1, database: url, nodeDatabase: nodeURL) { hub in
                        try await hub.nodes[0].database.checkSchema()
                        let tenant = try await hub.tenant()
                        let (phone, laptop) = (try await hub.token(tenant, "phone"), try await hub.token(tenant, "laptop"))
                        let key = Key<Int>("role.value", default: 0, sync: .manual)
                        for value in 1...3 { try stores[0].set(value, for: key) }
                        try await Replicator(store: stores[0], peers: [hub.peer(node: 0, token: phone)]).sync()
                        try await Replicator(store: stores[1], peers: [hub.peer(node: 0, token: laptop)]).sync()
                        #expect(stores[1][key] == 3)
                        try await hub.admin.setRetention(tenant: tenant, revisions: 1)

                        // A long-poll is woken by another device's push (LISTEN and NOTIFY).
                        let transport = HTTPTransport(baseURL: hub.urls[0], token: laptop)
                        let head = try await transport.info().head
                        let waiting = Task { try await transport.waitForChanges(after: head, timeout: .seconds(30)) }
                        try stores[0].set(4, for: key)
                        try await Replicator(store: stores[0], peers: [hub.peer(node: 0, token: phone)]).sync()
                        #expect(try await waiting.value, "the long-poll was answered because the log changed")

                        // Trims delete (the revision the new one replaced), and a revocation takes effect on the node.
                        let trimmed = try await hub.nodes[0].database.trim(tenant: try await hub.tenantID(tenant))
                        #expect(trimmed.deleted >= 1, "\(trimmed)")
                        #expect(try await hub.admin.revokeToken(tenant: tenant, device: "laptop"))
                        await #expect(throws: (any Error).self) { try await transport.info() }
                    }
                }
            }
        } catch {
            try? await Self.run(["DROP ROLE IF EXISTS \(role)"], on: base)
            throw error
        }
        try await Self.run(["DROP ROLE IF EXISTS \(role)"], on: base)
    }
}
