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

extension ChronicleCommand {
    struct Hub: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run and administer the multi-tenant hub (PostgreSQL).",
            discussion: """
                The database is a PostgreSQL URL, from --database or CHRONICLE_HUB_DATABASE:
                  postgres://USER:PASSWORD@HOST:5432/DATABASE?sslmode=require

                Run `chronicle hub migrate` once, then any number of `chronicle hub serve` nodes.
                """,
            subcommands: [Migrate.self, Serve.self, Tenant.self, Token.self, Keys.self])
    }
}

/// `--database URL` (no password in it: the command line is visible in `ps`), `--database-file
/// FILE` (0600, yours), else `CHRONICLE_HUB_DATABASE`.
struct DatabaseOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The PostgreSQL URL without a password (or set CHRONICLE_HUB_DATABASE).", valueName: "URL"))
    var database: String?
    @Option(help: ArgumentHelp("Read the PostgreSQL URL from this file (mode 0600, yours): for a URL with a password.", valueName: "FILE"))
    var databaseFile: String?

    func validate() throws {
        if database != nil && databaseFile != nil { throw ValidationError("give --database or --database-file, not both") }
        if let database, let url = URLComponents(string: database), url.password != nil {
            throw ValidationError(
                "--database holds a password, which every user of this machine sees in `ps`: put the URL in CHRONICLE_HUB_DATABASE or a file for --database-file")
        }
    }

    /// The database these options name: the command line's, else `CHRONICLE_HUB_DATABASE`, else
    /// `file`'s (`hub serve --config`).
    func open(over file: HubConfigFile? = nil, poolSize: Int = HubDatabase.defaultPoolSize) throws -> HubDatabase {
        var url: String?
        if let databaseFile {
            url = try Self.read(databaseFile)
        } else if let database {
            url = database
        } else if let environment = ProcessInfo.processInfo.environment["CHRONICLE_HUB_DATABASE"], !environment.isEmpty {
            url = environment
        } else if let path = file?.databaseFile {
            url = try Self.read(path)
        } else {
            url = file?.database
        }
        guard let url, !url.isEmpty else {
            throw ValidationError("give the database: CHRONICLE_HUB_DATABASE, --database-file FILE, or --database URL (without a password)")
        }
        return try HubDatabase(url: url, poolSize: poolSize, logger: Logger(label: "chronicle.hub"))
    }

    private static func read(_ path: String) throws -> String {
        let bytes = try SecretFile.contents(of: URL(fileURLWithPath: path), what: "database URL file")
        return String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs `body` with the database's connection pool running.
    func with<T: Sendable>(over file: HubConfigFile? = nil, _ body: @escaping @Sendable (HubDatabase) async throws -> T) async throws -> T {
        let database = try open(over: file)
        try await database.checkConnection()
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                await database.run()
                return nil
            }
            await database.untilRunning()
            let result = try await body(database)
            group.cancelAll()
            return result
        }
    }
}
