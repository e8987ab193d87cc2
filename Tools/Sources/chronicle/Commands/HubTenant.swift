import ArgumentParser
@_spi(Tools) import Chronicle
import ChronicleHTTP
import ChronicleHTTPServer
import ChronicleHub
import Foundation
import Logging
import Metrics
import Prometheus

extension ChronicleCommand.Hub {
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
}

extension ChronicleCommand.Hub.Tenant {
    struct Retention: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set how many revisions of a key a tenant's log keeps.",
            discussion: """
                The hub keeps, of each key, the newest revisions each device pushed and each device's \
                newest by the conflict order, so a tenant's log holds live values and its quota counts \
                them. A device's own pushes never evict another device's events. The hub trims after \
                appends, in short transactions; this command trims the tenant at once.

                Examples:
                  chronicle hub tenant retention family --revisions 20
                  chronicle hub tenant retention audit-org --forever
                """)
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The tenant's name.") var name: String
        @Option(help: "Revisions of a key kept per device (default 100).") var revisions: Int32?
        @Flag(help: "Keep every revision (the log then grows with every write).") var forever = false

        func validate() throws {
            if forever, revisions != nil { throw ValidationError("give --revisions or --forever, not both") }
            if let revisions, revisions < 1 { throw ValidationError("--revisions is at least 1") }
        }

        func run() async throws {
            let (name, kept): (String, Int32?) = (name, forever ? 0 : revisions)
            try await database.with { try await $0.setRetention(tenant: name, revisions: kept) }
            print("retention set: \(forever ? "every revision" : "\(kept ?? HubDatabase.defaultRetainedRevisions) revisions a key per device")")
        }
    }
}
