import ArgumentParser
import ChronicleCommandLine
@_spi(Tools) import Chronicle
import ChronicleHTTP
import ChronicleHTTPServer
import ChronicleHub
import Foundation
import Logging
import Metrics
import Prometheus

extension ChronicleCommand.Hub {
    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create or upgrade the hub's tables.",
            discussion: """
                Applies the schema versions the database has not recorded, in order, each once, and records \
                when (table schema_migrations); concurrent runs wait for each other. --status lists every \
                version with when it was applied, or pending.
                """)
        @OptionGroup var database: DatabaseOptions
        @Flag(help: "List the schema versions and when each was applied; change nothing.") var status = false
        @Flag(help: "With --status: JSON Lines, one version per line.") var json = false

        func run() async throws {
            if status {
                let (migrations, unknown) = try await database.with { try await $0.migrationStatus() }
                for (migration, applied) in migrations {
                    if json {
                        printJSONLine(["version": migration.version, "name": migration.name, "applied": applied.map(iso)])
                    } else {
                        print("\(migration.version)\t\(applied.map(iso) ?? "pending")\t\(migration.name)")
                    }
                }
                for (version, oldest) in unknown {
                    let beside = (oldest ?? version) <= HubDatabase.migrations.count
                    if json {
                        printJSONLine(["version": version, "unknown": true, "runsBeside": beside])
                    } else {
                        print("\(version)\tapplied by a newer chronicle\t(unknown to this one; \(beside ? "it runs beside it" : "upgrade it"))")
                    }
                }
                return
            }
            let applied = try await database.with { try await $0.migrate() }
            if applied.isEmpty {
                print("the schema is up to date (version \(HubDatabase.migrations.count))")
            }
            for migration in applied { print("applied \(migration.version): \(migration.name)") }
        }
    }
}
