import ArgumentParser
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
    func open(over file: HubConfigFile? = nil) throws -> HubDatabase {
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
        return try HubDatabase(url: url, logger: Logger(label: "chronicle.hub"))
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

extension ChronicleCommand.Hub {
    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create or upgrade the hub's tables.",
            discussion: """
                Applies the schema versions the database has not recorded, in order, each once, and records
                when (table schema_migrations); concurrent runs wait for each other. --status lists every
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
                for version in unknown {
                    if json {
                        printJSONLine(["version": version, "unknown": true])
                    } else {
                        print("\(version)\tapplied by a newer chronicle\t(unknown to this one)")
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

    struct Serve: AsyncParsableCommand, LoggingCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve every tenant over HTTP (stateless: run several behind a load balancer).",
            discussion: """
                SIGINT/SIGTERM stop it gracefully. /healthz and /metrics need no token, so they are served
                on an address of their own (--metrics-host, --metrics-port), loopback by default, never
                on the public port.
                A configuration file (--config) holds any of the options below as JSON, in snake case:
                  {"database_file": "database", "host": "0.0.0.0", "tls_cert": "cert.pem", "tls_key": "key.pem",
                   "max_connections": 10000, "log_format": "json"}
                Relative paths in it are relative to the file; "metrics": false is --no-metrics.
                """)
        @OptionGroup var database: DatabaseOptions
        @Option(help: ArgumentHelp(
            "Read settings from this JSON file: the long options below in snake case, for example {\"port\": 8787, \"max_connections\": 10000}. Options on the command line win, then the environment, then the file.",
            valueName: "FILE"))
        var config: String?
        @Option(help: "The address to bind (default 127.0.0.1).") var host: String?
        @Option(help: "The port (0: any free one; default 8787).") var port: Int?
        @Option(help: "The address of /healthz and /metrics (keep it off the public interface; default 127.0.0.1).") var metricsHost: String?
        @Option(help: "The port of /healthz and /metrics (0: any free one; default 9464).") var metricsPort: Int?
        @Flag(inversion: .prefixedNo, help: "Serve /healthz and /metrics (the default), or not at all.") var metrics: Bool?
        @Option(help: "The most connections the node serves at once; each long-polling device holds one (default 1024).") var maxConnections: Int?
        @Option(help: "The longest a long-poll is held, in seconds (default 30).") var maxWaitSeconds: Int?
        @Option(help: "The largest push body accepted, in bytes (default 16 MiB).") var maxBodyBytes: Int?
        @OptionGroup var server: ServerOptions
        @OptionGroup var log: LogOptions

        /// What is in force: the command line's options over the configuration file's over the defaults.
        struct Settings {
            var file: HubConfigFile?
            var host: String
            var port: Int
            var metricsHost: String
            var metricsPort: Int
            var metrics: Bool
            var maxConnections: Int
            var maxWait: Int
            var maxBodyBytes: Int
            var server: ServerSettings
        }

        func settings() throws -> Settings {
            let file = try config.map(HubConfigFile.load)
            let settings = Settings(
                file: file, host: host ?? file?.host ?? "127.0.0.1", port: port ?? file?.port ?? 8787,
                metricsHost: metricsHost ?? file?.metricsHost ?? "127.0.0.1", metricsPort: metricsPort ?? file?.metricsPort ?? 9464,
                metrics: metrics ?? file?.metrics ?? true, maxConnections: maxConnections ?? file?.maxConnections ?? 1_024,
                maxWait: maxWaitSeconds ?? file?.maxWaitSeconds ?? 30, maxBodyBytes: maxBodyBytes ?? file?.maxBodyBytes ?? 16 << 20,
                server: server.settings(over: file))
            try settings.server.validate(host: settings.host)
            // Named as an option and as a setting of the file: either may have given it.
            func option(_ name: String) -> String {
                config.map { "--\(name) (\"\(name.replacingOccurrences(of: "-", with: "_"))\" in \($0))" } ?? "--\(name)"
            }
            for (name, port) in [("port", settings.port), ("metrics-port", settings.metricsPort)] where !(0...65535).contains(port) {
                throw ValidationError("\(option(name)) must be 0...65535")
            }
            if settings.maxConnections < 1 { throw ValidationError("\(option("max-connections")) is at least 1") }
            if !(1...300).contains(settings.maxWait) { throw ValidationError("\(option("max-wait-seconds")) is 1...300") }
            if settings.maxBodyBytes < 1 << 16 { throw ValidationError("\(option("max-body-bytes")) is at least 65536") }
            if let database = file?.database, URLComponents(string: database)?.password != nil {
                throw ValidationError("\(config ?? ""): \"database\" holds a password; put the URL in a 0600 file named by \"database_file\"")
            }
            if let level = file?.logLevel, Logger.Level(rawValue: level) == nil {
                throw ValidationError("\(config ?? ""): \"log_level\" is trace, debug, info, notice, warning, error or critical")
            }
            if let format = file?.logFormat, !["text", "json"].contains(format) {
                throw ValidationError("\(config ?? ""): \"log_format\" is text or json")
            }
            return settings
        }

        func validate() throws {
            _ = try settings()
        }

        /// The configuration file's log settings, under the command line's and the environment's.
        var logDefaults: (level: String?, format: String?) {
            let file = config.flatMap { try? HubConfigFile.load($0) }
            return (file?.logLevel, file?.logFormat)
        }

        func run() async throws {
            let settings = try settings()
            let hubDatabase = try database.open(over: settings.file)
            // Never serve a schema this build does not match: one it would fail on, or a newer one.
            // (`with` checks the connection first: a database it cannot use is reported at once.)
            let (migrations, unknown) = try await database.with(over: settings.file) { try await $0.migrationStatus() }
            if let version = unknown.max() {
                throw HubDatabaseUnavailable(
                    reason: "the hub's database has schema version \(version), newer than this chronicle knows: upgrade chronicle")
            }
            let pending = migrations.filter { $0.applied == nil }.map(\.migration.version)
            if !pending.isEmpty {
                throw HubDatabaseUnavailable(
                    reason: "the hub's database lacks schema versions \(pending.map(String.init).joined(separator: ", ")): run `chronicle hub migrate` first")
            }
            // The metrics backend, chosen here: Prometheus, served on the operator's address.
            let registry = PrometheusCollectorRegistry()
            let factory = PrometheusMetricsFactory(registry: registry)
            MetricsSystem.bootstrap(factory)
            var node = HubNode(database: hubDatabase, logger: Logger(label: "chronicle.hub"), metrics: factory)
            node.metricsText = { registry.emitToBuffer() }
            if let limit = settings.server.maxConnectionsPerAddress { node.maxConnectionsPerAddress = limit }
            node.maxConnections = settings.maxConnections
            node.maxWait = .seconds(settings.maxWait)
            node.idleTimeout = .seconds(max(75, settings.maxWait + 45))
            node.maxBodySize = settings.maxBodyBytes
            if settings.metrics { node.operatorEndpoint = .init(host: settings.metricsHost, port: settings.metricsPort) }
            let (host, metricsHost) = (settings.host, settings.metricsHost)
            try await node.run(
                host: host, port: settings.port, tls: settings.server.tls, gracefulShutdownSignals: true,
                onRunning: { bound in
                    // Written at once, not buffered: a supervisor reading a pipe sees it now.
                    FileHandle.standardOutput.write(Data("hub serving on \(host):\(bound)\n".utf8))
                },
                onOperatorRunning: { bound in
                    FileHandle.standardOutput.write(Data("hub metrics and health on \(metricsHost):\(bound)\n".utf8))
                })
        }
    }

    struct Tenant: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add and list tenants; set their quotas and retention.", subcommands: [Add.self, List.self, Quota.self, Retention.self])

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Add a tenant (a user or an organisation: its devices sync together).",
                discussion: "A new tenant gets quotas of 1,000,000 events and 1 GiB unless told otherwise (--unlimited for none).")
            @OptionGroup var database: DatabaseOptions
            @Argument(help: "The tenant's name.") var name: String
            @Option(help: "The most events its log may hold (default 1,000,000).") var maxEvents: Int64?
            @Option(help: "The most bytes of events its log may hold (default 1 GiB).") var maxBytes: Int64?
            @Flag(help: "No quotas (one tenant's devices may then fill the database).") var unlimited = false

            static let defaultMaxEvents: Int64 = 1_000_000
            static let defaultMaxBytes: Int64 = 1 << 30

            func validate() throws {
                if unlimited, maxEvents != nil || maxBytes != nil { throw ValidationError("--unlimited takes no --max-events or --max-bytes") }
                if (maxEvents ?? 1) < 1 || (maxBytes ?? 1) < 1 { throw ValidationError("a quota is at least 1") }
            }

            func run() async throws {
                let name = name
                let maxEvents = unlimited ? nil : maxEvents ?? Self.defaultMaxEvents
                let maxBytes = unlimited ? nil : maxBytes ?? Self.defaultMaxBytes
                let added = try await database.with { try await $0.addTenant(name, maxEvents: maxEvents, maxBytes: maxBytes) }
                guard added else { throw ValidationError("a tenant named \(terminalSafe(name)) exists already") }
                print("added tenant \(terminalSafe(name))")
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List the tenants: devices, events, bytes, quotas.")
            @OptionGroup var database: DatabaseOptions
            @Flag(help: "JSON Lines: one tenant per line.") var json = false

            func run() async throws {
                let tenants = try await database.with { try await $0.tenants() }
                if json {
                    for tenant in tenants {
                        printJSONLine([
                            "tenant": tenant.name, "devices": tenant.devices, "events": tenant.events, "bytes": tenant.bytes,
                            "maxEvents": tenant.maxEvents, "maxBytes": tenant.maxBytes,
                        ])
                    }
                    return
                }
                print("tenant\tdevices\tevents\tbytes\tmax events\tmax bytes")
                for tenant in tenants {
                    print(
                        "\(terminalSafe(tenant.name))\t\(tenant.devices)\t\(tenant.events)\t\(tenant.bytes)\t"
                            + "\(tenant.maxEvents.map(String.init) ?? "-")\t\(tenant.maxBytes.map(String.init) ?? "-")")
                }
            }
        }

        struct Quota: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Set a tenant's quotas (omit one for no limit).")
            @OptionGroup var database: DatabaseOptions
            @Argument(help: "The tenant's name.") var name: String
            @Option(help: "The most events its log may hold.") var maxEvents: Int64?
            @Option(help: "The most bytes of events its log may hold.") var maxBytes: Int64?

            func run() async throws {
                let (name, maxEvents, maxBytes) = (name, maxEvents, maxBytes)
                try await database.with { try await $0.setQuota(tenant: name, maxEvents: maxEvents, maxBytes: maxBytes) }
                print("quota set")
            }
        }
    }

    struct Token: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Issue and revoke device tokens.", subcommands: [Issue.self, Revoke.self])

        struct Issue: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Issue a device's token: shown once, stored only as its hash.",
                discussion: """
                    Issuing again replaces the device's previous token. With --output the token goes to a new
                    file of mode 0600 (what `chronicle sync --token-file` accepts), else to standard output.
                    """)
            @OptionGroup var database: DatabaseOptions
            @Option(help: "The tenant.") var tenant: String
            @Option(help: "The device's name.") var device: String
            @Option(help: ArgumentHelp("Write the token to this new file, mode 0600 (an existing file is refused).", valueName: "FILE"))
            var output: String?

            func run() async throws {
                let (tenant, device) = (tenant, device)
                guard let output else {
                    print(try await database.with { try await $0.issueToken(tenant: tenant, device: device) })
                    return
                }
                // The file first: a token issued into a file that cannot be made would be lost.
                let descriptor = open(output, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
                guard descriptor >= 0 else {
                    throw ChronicleError.io(path: output, reason: "cannot create it (\(String(cString: strerror(errno)))); the token was not issued")
                }
                let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
                do {
                    let token = try await database.with { try await $0.issueToken(tenant: tenant, device: device) }
                    try handle.write(contentsOf: Data((token + "\n").utf8))
                    try handle.synchronize()
                } catch {
                    try? FileManager.default.removeItem(atPath: output)
                    throw error
                }
                print("issued the token of \(terminalSafe(device)) into \(terminalSafe(output)) (mode 0600)")
            }
        }

        struct Revoke: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Revoke a device's token: refused at once on every node.")
            @OptionGroup var database: DatabaseOptions
            @Option(help: "The tenant.") var tenant: String
            @Option(help: "The device's name.") var device: String

            func run() async throws {
                let (tenant, device) = (tenant, device)
                guard try await database.with({ try await $0.revokeToken(tenant: tenant, device: device) }) else {
                    throw ValidationError("\(terminalSafe(device)) of \(terminalSafe(tenant)) has no token")
                }
                print("revoked")
            }
        }
    }

    struct Keys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List and drop the wrapped-key records a tenant's devices pushed.",
            discussion: "A device stores at most 64 records and a tenant 1,024; drop a device's records to free its slots.",
            subcommands: [List.self, Drop.self])

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Count a tenant's wrapped-key records per device that pushed them.")
            @OptionGroup var database: DatabaseOptions
            @Option(help: "The tenant.") var tenant: String
            @Flag(help: "JSON Lines: one device per line.") var json = false

            func run() async throws {
                let tenant = tenant
                let counts = try await database.with { try await $0.keyCounts(tenant: tenant) }
                if json {
                    for (device, keys) in counts { printJSONLine(["device": device.isEmpty ? nil : device, "keys": keys]) }
                    return
                }
                print("device\tkeys")
                for (device, keys) in counts { print("\(device.isEmpty ? "-" : terminalSafe(device))\t\(keys)") }
            }
        }

        struct Drop: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Drop the wrapped-key records one device pushed.",
                discussion: "Members keep the keys they opened; a genuine record dropped here is pushed again by its device's next change.")
            @OptionGroup var database: DatabaseOptions
            @Option(help: "The tenant.") var tenant: String
            @Option(help: "The device whose records to drop (\"-\": records from before the hub recorded devices).") var device: String

            func run() async throws {
                let (tenant, device) = (tenant, device == "-" ? nil : device)
                let dropped = try await database.with { try await $0.dropKeys(tenant: tenant, device: device) }
                print("dropped \(dropped) wrapped-key records")
            }
        }
    }
}
