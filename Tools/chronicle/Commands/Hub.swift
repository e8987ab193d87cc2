import ArgumentParser
import Chronicle
import ChronicleHub
import Foundation
import Logging

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

/// `--database URL`, else `CHRONICLE_HUB_DATABASE`.
struct DatabaseOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The PostgreSQL URL (or set CHRONICLE_HUB_DATABASE).", valueName: "URL"))
    var database: String?

    func open() throws -> HubDatabase {
        guard let url = database ?? ProcessInfo.processInfo.environment["CHRONICLE_HUB_DATABASE"], !url.isEmpty else {
            throw ValidationError("give the database: --database URL or CHRONICLE_HUB_DATABASE")
        }
        return try HubDatabase(url: url, logger: Logger(label: "chronicle.hub"))
    }

    /// Runs `body` with the database's connection pool running.
    func with<T: Sendable>(_ body: @escaping @Sendable (HubDatabase) async throws -> T) async throws -> T {
        let database = try open()
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                await database.run()
                return nil
            }
            let result = try await body(database)
            group.cancelAll()
            return result
        }
    }
}

extension ChronicleCommand.Hub {
    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create or upgrade the hub's tables (idempotent).")
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            try await database.with { try await $0.migrate() }
            print("migrated")
        }
    }

    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve every tenant over HTTP (stateless: run several behind a load balancer).",
            discussion: "SIGINT/SIGTERM stop it gracefully. /healthz and /metrics need no token.")
        @OptionGroup var database: DatabaseOptions
        @Option(help: "The address to bind.") var host = "127.0.0.1"
        @Option(help: "The port (0: any free one).") var port = 8787

        func run() async throws {
            let node = HubNode(database: try database.open())
            try await node.run(host: host, port: port, gracefulShutdownSignals: true) { bound in
                // Written at once, not buffered: a supervisor reading a pipe sees it now.
                FileHandle.standardOutput.write(Data("hub serving on \(host):\(bound)\n".utf8))
            }
        }
    }

    struct Tenant: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add and list tenants.", subcommands: [Add.self, List.self, Quota.self])

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Add a tenant (a user or an organisation: its devices sync together).")
            @OptionGroup var database: DatabaseOptions
            @Argument(help: "The tenant's name.") var name: String
            @Option(help: "The most events its log may hold.") var maxEvents: Int64?
            @Option(help: "The most bytes of events its log may hold.") var maxBytes: Int64?

            func run() async throws {
                let (name, maxEvents, maxBytes) = (name, maxEvents, maxBytes)
                let added = try await database.with { try await $0.addTenant(name, maxEvents: maxEvents, maxBytes: maxBytes) }
                guard added else { throw ValidationError("a tenant named \(terminalSafe(name)) exists already") }
                print("added tenant \(terminalSafe(name))")
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List the tenants: devices, events, bytes, quotas.")
            @OptionGroup var database: DatabaseOptions

            func run() async throws {
                let tenants = try await database.with { try await $0.tenants() }
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
                abstract: "Issue a device's token: printed once on standard output, stored only as its hash.",
                discussion: "Issuing again replaces the device's previous token.")
            @OptionGroup var database: DatabaseOptions
            @Option(help: "The tenant.") var tenant: String
            @Option(help: "The device's name.") var device: String

            func run() async throws {
                let (tenant, device) = (tenant, device)
                print(try await database.with { try await $0.issueToken(tenant: tenant, device: device) })
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

            func run() async throws {
                let tenant = tenant
                let counts = try await database.with { try await $0.keyCounts(tenant: tenant) }
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
