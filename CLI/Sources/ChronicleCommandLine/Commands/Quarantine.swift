import ArgumentParser
@_spi(Tools) import Chronicle
import Foundation

extension EverydayCommands {
    struct Quarantine: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List, or drop, what peers sent that this replica set aside.",
            discussion: """
                Events and wrapped keys that failed authentication or validation are kept aside with their \
                reason and source: never applied, never relayed. A sealed value is never shown.

                Examples:
                  chronicle quarantine --store ./store
                  chronicle quarantine --store ./store --json
                  chronicle quarantine --store ./store --drop 1234 --drop 5678
                  chronicle quarantine --store ./store --drop-all
                """)

        @OptionGroup var options: StoreOptions
        @Flag(help: "Print JSON Lines, one item per line.") var json = false
        @Option(name: .customLong("drop"), help: ArgumentHelp("Drop the item with this id (repeatable).", valueName: "ID"))
        var drop: [UInt64] = []
        @Flag(help: "Drop every item.") var dropAll = false

        func validate() throws {
            if dropAll && !drop.isEmpty { throw ValidationError("give --drop ID or --drop-all, not both") }
        }

        func run() throws {
            let store = try options.openExisting()
            if dropAll || !drop.isEmpty {
                let dropped = try store.dropQuarantined(dropAll ? nil : drop)
                print("dropped \(dropped)")
                return
            }
            let items = try store.quarantinedItems()
            if json {
                for item in items { print(jsonSafe(Self.jsonLine(item))) }
                return
            }
            guard !items.isEmpty else {
                print("nothing quarantined")
                return
            }
            var rows = [["id", "arrived", "kind", "reason", "source", "identity", "key", "detail"]]
            for item in items {
                rows.append([
                    "\(item.id)", iso(item.date), item.kind == .event ? "event" : "wrapped key", "\(item.reason)", item.source,
                    item.origin.map { "\($0.short):\(item.counter ?? 0)" } ?? "-",
                    (item.keyName ?? "-") + (item.isSealed ? " (sealed)" : ""), item.detail,
                ])
            }
            printTable(rows)
        }

        static func jsonLine(_ item: QuarantinedItem) -> String {
            var fields = [
                "\"id\":\(item.id)", "\"arrived\":\(jsonString(iso(item.date)))",
                "\"kind\":\(jsonString(item.kind == .event ? "event" : "wrappedKey"))",
                "\"reason\":\(jsonString("\(item.reason)"))", "\"reasonCode\":\(item.reason.rawValue)", "\"source\":\(jsonString(item.source))",
                "\"detail\":\(jsonString(item.detail))", "\"sealed\":\(item.isSealed)",
            ]
            if let origin = item.origin { fields.append("\"writer\":\(jsonString(origin.hex))") }
            if let counter = item.counter { fields.append("\"counter\":\(counter)") }
            if let key = item.keyName { fields.append("\"key\":\(jsonString(key))") }
            return "{" + fields.joined(separator: ",") + "}"
        }
    }
}
