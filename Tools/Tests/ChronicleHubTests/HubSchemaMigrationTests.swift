@testable import ChronicleHub
import Foundation
import Logging
import PostgresNIO
import Subprocess
import SystemPackage
import Testing
import ToolsTestSupport

/// The hub's schema has versions, each applied once, in order, and recorded; a node never serves
/// a schema it does not match.
@Suite(.enabled(if: hasTestDatabase, "needs CHRONICLE_TEST_DATABASE: run scripts/test.sh"))
struct HubSchemaMigrationTests {
    static func lines(_ output: String) -> [[String: Any]] {
        output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// `chronicle hub serve` against `url` must exit with a refusal; a node that starts anyway is
    /// killed after a minute (a guard, not a measurement) and the test fails.
    static func serveRefuses(_ url: String) async throws -> String {
        let result = try await Subprocess.run(
            .path(FilePath(try chronicleExecutable().path)),
            arguments: ["hub", "serve", "--database", url, "--port", "0", "--no-metrics"],
            input: .none, output: .discarded, error: .sequence
        ) { execution in
            let guardTask = Task { try? await Task.sleep(for: hangGuard); try? execution.send(signal: .kill) }
            defer { guardTask.cancel() }
            var text = ""
            for try await line in execution.standardError.strings() { text += line }
            return text
        }
        #expect(result.terminationStatus == TerminationStatus.exited(2), "\(result.closureResult)")
        return result.closureResult
    }

    @Test func versionsApplyOnceInOrderAndAreRecorded() async throws {
        try await withEmptyDatabase { url in
            let before = try await runChronicle(["hub", "migrate", "--status", "--json", "--database", url])
            #expect(before.status == 0, "\(before.stderr)")
            let all = HubDatabase.migrations.map(\.version)
            #expect(Self.lines(before.stdout).map { $0["applied"] == nil } == all.map { _ in true }, "all pending: \(before.stdout)")
            #expect(try await Self.serveRefuses(url).contains("lacks schema versions \(all.map(String.init).joined(separator: ", "))"))

            let first = try await runChronicle(["hub", "migrate", "--database", url])
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stdout.split(separator: "\n").map(String.init) == HubDatabase.migrations.map { "applied \($0.version): \($0.name)" })
            let again = try await runChronicle(["hub", "migrate", "--database", url])
            #expect(again.stdout == "the schema is up to date (version \(all.count))\n")
            let after = try await runChronicle(["hub", "migrate", "--status", "--json", "--database", url])
            let versions = Self.lines(after.stdout)
            #expect(versions.map { ($0["version"] as? NSNumber)?.intValue } == all)
            #expect(versions.allSatisfy { $0["applied"] is String }, "\(after.stdout)")
        }
    }

    /// A database the hub migrated before it recorded versions: its tables and data stay, and
    /// every version is recorded without change.
    @Test func aDatabaseFromBeforeTheHistoryIsRecordedWithoutChange() async throws {
        try await withEmptyDatabase { url in
            #expect(try await runChronicle(["hub", "migrate", "--database", url]).status == 0)
            #expect(try await runChronicle(["hub", "tenant", "add", "kept", "--database", url]).status == 0)
            let logger = Logger(label: "test")
            let database = try HubDatabase(url: url, logger: logger)
            let pool = Task { await database.run() }
            defer { pool.cancel() }
            try await database.client.query("DROP TABLE schema_migrations", logger: logger)
            let migrate = try await runChronicle(["hub", "migrate", "--database", url])
            #expect(migrate.status == 0, "\(migrate.stderr)")
            #expect(migrate.stdout.split(separator: "\n").count == HubDatabase.migrations.count)
            #expect(try await database.tenants().contains { $0.name == "kept" })
        }
    }

    /// A schema version this build does not know (a newer chronicle migrated the database):
    /// `migrate` and `serve` refuse, `--status` shows it.
    @Test func aNewerSchemaIsRefused() async throws {
        try await withEmptyDatabase { url in
            #expect(try await runChronicle(["hub", "migrate", "--database", url]).status == 0)
            let logger = Logger(label: "test")
            let database = try HubDatabase(url: url, logger: logger)
            let pool = Task { await database.run() }
            defer { pool.cancel() }
            try await database.client.query("INSERT INTO schema_migrations (version, name) VALUES (99, 'from the future')", logger: logger)
            let migrate = try await runChronicle(["hub", "migrate", "--database", url])
            #expect(migrate.status == 2 && migrate.stderr.contains("newer than this chronicle knows"), "\(migrate.stderr)")
            #expect(try await Self.serveRefuses(url).contains("newer than this chronicle knows"))
            let status = try await runChronicle(["hub", "migrate", "--status", "--database", url])
            #expect(status.stdout.contains("99\tapplied by a newer chronicle"), "\(status.stdout)")
        }
    }

    /// A rolling upgrade: a newer chronicle applied a version that names this build's newest as
    /// one running beside it (it only expanded the schema). This build keeps serving and has
    /// nothing to migrate; `--status` says it runs beside it. A version that names itself (it
    /// took something away the previous nodes read) stops this build.
    @Test func aNewerVersionThatRunsBesideThisBuildIsServed() async throws {
        try await withEmptyDatabase { url in
            #expect(try await runChronicle(["hub", "migrate", "--database", url]).status == 0)
            let logger = Logger(label: "test")
            let database = try HubDatabase(url: url, logger: logger)
            let pool = Task { await database.run() }
            defer { pool.cancel() }
            let known = HubDatabase.migrations.count
            try await database.client.query(
                "INSERT INTO schema_migrations (version, name, oldest_node) VALUES (\(known + 1), 'an expanding version', \(known))", logger: logger)
            try await database.checkSchema()
            #expect(try await database.migrate().isEmpty)
            let status = try await runChronicle(["hub", "migrate", "--status", "--database", url])
            #expect(status.stdout.contains("\(known + 1)\tapplied by a newer chronicle\t(unknown to this one; it runs beside it)"), "\(status.stdout)")

            try await database.client.query("UPDATE schema_migrations SET oldest_node = \(known + 1) WHERE version = \(known + 1)", logger: logger)
            await #expect(throws: HubDatabaseUnavailable.self) { try await database.checkSchema() }
            await #expect(throws: HubDatabaseUnavailable.self) { try await database.migrate() }
            #expect(try await Self.serveRefuses(url).contains("newer than this chronicle knows"))
        }
    }
}
