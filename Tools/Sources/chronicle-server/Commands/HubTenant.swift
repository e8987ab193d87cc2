import ArgumentParser
import ChronicleCommandLine
@_spi(Tools) import Chronicle
import ChronicleHTTP
import ChronicleHTTPServer
import ChronicleHub
import Foundation
import Logging
import Metrics
import Synchronization
import Prometheus

extension ChronicleCommand.Hub {
    struct Tenant: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add, list and show tenants; set their quotas and retention.",
            subcommands: [Add.self, List.self, Show.self, Quota.self, Retention.self])

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
            static let configuration = CommandConfiguration(
                abstract: "List the tenants, a page at a time: devices, events, bytes, quotas, retention.",
                discussion: """
                    Tenants in name order, each printed as it is read. A full page ends with the option that \
                    shows the next one (on standard error, so a script reading standard output gets rows only).

                    Examples:
                      chronicle hub tenant list --limit 50
                      chronicle hub tenant list --prefix acme- --after acme-0042 --json
                    """)
            @OptionGroup var database: DatabaseOptions
            @Option(help: "The most tenants to show.") var limit = 100
            @Option(help: "Start after this tenant's name (the last of the previous page).") var after: String?
            @Option(help: "Only tenants whose names start with this.") var prefix = ""
            @Flag(help: "JSON Lines: one tenant per line (docs/FORMAT.md 14).") var json = false

            func validate() throws {
                guard limit > 0, limit <= 100_000 else { throw ValidationError("--limit takes 1 to 100000") }
            }

            func run() async throws {
                let (after, prefix, limit, json) = (after, prefix, limit, json)
                if !json { print("tenant\tdevices\tevents\tbytes\tmax events\tmax bytes\tretained revisions") }
                let shown = Counter()
                let last = LastName()
                try await database.with { database in
                    try await database.tenants(after: after, prefix: prefix, limit: limit) { tenant in
                        shown.add()
                        last.set(tenant.name)
                        if json {
                            printJSONLine([
                                "tenant": tenant.name, "devices": tenant.devices, "events": tenant.events, "bytes": tenant.bytes,
                                "maxEvents": tenant.maxEvents, "maxBytes": tenant.maxBytes, "retainRevisions": tenant.retainRevisions,
                            ])
                        } else {
                            print(
                                "\(terminalSafe(tenant.name))\t\(tenant.devices)\t\(tenant.events)\t\(tenant.bytes)\t"
                                    + "\(tenant.maxEvents.map(String.init) ?? "-")\t\(tenant.maxBytes.map(String.init) ?? "-")\t"
                                    + "\(tenant.retainRevisions.map(String.init) ?? "default")")
                        }
                        fflush(nil)  // each row as it is read, also into a pipe
                    }
                }
                if shown.value == limit, let name = last.value {
                    printError("more: --after \(terminalSafe(name))")
                }
            }
        }

        struct Show: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Show one tenant: its counts, quotas, retention and devices (created, last seen, pushed, pulled).")
            @OptionGroup var database: DatabaseOptions
            @Argument(help: "The tenant's name.") var name: String
            @Flag(help: "One JSON object (docs/FORMAT.md 14).") var json = false

            func run() async throws {
                let name = name
                let (tenant, created, devices) = try await database.with { try await $0.tenant(named: name) }
                let stamp = { (date: Date) in ISO8601DateFormatter().string(from: date) }
                if json {
                    printJSONLine([
                        "tenant": tenant.name, "created": stamp(created), "events": tenant.events, "bytes": tenant.bytes,
                        "maxEvents": tenant.maxEvents, "maxBytes": tenant.maxBytes, "retainRevisions": tenant.retainRevisions,
                        "devices": devices.map { device -> [String: Any] in
                            var object: [String: Any] = [
                                "device": device.name, "created": stamp(device.created), "pushed": device.pushed, "pulled": device.pulled,
                            ]
                            if let seen = device.lastSeen { object["lastSeen"] = stamp(seen) }
                            return object
                        },
                    ])
                    return
                }
                print("tenant \(terminalSafe(tenant.name)), created \(stamp(created))")
                print("events \(tenant.events) of \(tenant.maxEvents.map(String.init) ?? "no limit"), bytes \(tenant.bytes) of "
                    + "\(tenant.maxBytes.map(String.init) ?? "no limit"), revisions kept \(tenant.retainRevisions.map(String.init) ?? "the hub's default")")
                print("device\tcreated\tlast seen\tpushed\tpulled")
                for device in devices {
                    print("\(terminalSafe(device.name))\t\(stamp(device.created))\t\(device.lastSeen.map(stamp) ?? "never")\t\(device.pushed)\t\(device.pulled)")
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
                appends, in short statements; this command trims every key of the tenant at once, \
                a step of 64 keys at a time, and reports each step on standard error.

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
            let trim = try await database.with {
                try await $0.setRetention(tenant: name, revisions: kept) { progress in
                    printError("trimming: \(progress.keys) keys so far, \(progress.deleted) rows deleted")
                }
            }
            print("retention set: \(forever ? "every revision" : "\(kept ?? HubDatabase.defaultRetainedRevisions) revisions a key per device")")
            print("trimmed: \(trim)")
        }
    }
}

/// How many rows a page showed.
private final class Counter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// The last name a page showed.
private final class LastName: Sendable {
    private let name = Mutex<String?>(nil)
    func set(_ value: String) { name.withLock { $0 = value } }
    var value: String? { name.withLock { $0 } }
}
