import ArgumentParser
@_spi(Tools) import Chronicle
import Foundation

extension EverydayCommands {
    struct KeysCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "keys",
            abstract: "The audit catalog: every key with domain, policy, size, revisions, last writer and sealing.",
            discussion: """
                With --json, one object per key: key, domain, policy, size, revisions, lastWriter (the replica id \
                of the device whose change is current), lastChanged, sealed, removed.

                Example:
                  chronicle keys --store ./store --json
                """)

        @OptionGroup var options: StoreOptions
        @Flag(help: "JSON Lines: one key per line.") var json = false

        func run() throws {
            let keys = try options.openExisting().catalog()
            if json {
                for key in keys {
                    print(jsonSafe(
                        "{\"key\":\(jsonString(key.name)),\"domain\":\"\(key.domain)\",\"policy\":\"\(key.policy)\",\"size\":\(key.size),"
                            + "\"revisions\":\(key.revisions),\"lastWriter\":\"\(key.lastWriter.hex)\",\"lastChanged\":\"\(iso(Self.date(key.lastChanged)))\","
                            + "\"sealed\":\(key.isSealed),\"removed\":\(key.isRemoved)}"))
                }
                return
            }
            let header = ["KEY", "DOMAIN", "POLICY", "SIZE", "REVISIONS", "LAST WRITER", "CHANGED", "SEALED"]
            let rows = keys.map { key in
                [
                    key.name + (key.isRemoved ? " (removed)" : ""), key.domain, key.policy.description, "\(key.size)", "\(key.revisions)",
                    key.lastWriter.short, iso(Self.date(key.lastChanged)), key.isSealed ? "yes" : "no",
                ]
            }
            printTable([header] + rows)
        }

        static func date(_ hlc: HLC) -> Date { Date(timeIntervalSince1970: Double(hlc.milliseconds) / 1000) }
    }
}
