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
