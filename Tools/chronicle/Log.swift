import ArgumentParser
import Chronicle
import Foundation

struct Log: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the events of the log, oldest first.",
        discussion: "Example: chronicle log --key settings.theme --json --store ./store")

    @OptionGroup var options: StoreOptions
    @Option(help: "Only events of this key.") var key: String?
    @Flag(help: "JSON Lines: one event per line.") var json = false

    func run() throws {
        let entries = try options.open().logEntries().filter { key == nil || $0.key == key }
        for entry in entries {
            print(json ? Self.jsonLine(entry) : Self.textLine(entry))
        }
    }

    static func jsonLine(_ entry: LogEntry) -> String {
        var fields: [String] = [
            "\"sequence\":\(entry.sequence)",
            "\"origin\":\"\(entry.origin.hex)\"",
            "\"counter\":\(entry.counter)",
            "\"timestamp\":\"\(ISO8601DateFormatter().string(from: entry.date))\"",
            "\"hlc\":\(entry.timestamp.rawValue)",
            "\"domain\":\"\(entry.domain)\"",
            "\"key\":\(quote(entry.key))",
            "\"op\":\"\(entry.operation)\"",
            "\"policy\":\"\(entry.policy)\"",
            "\"sealed\":\(entry.isSealed)",
            "\"size\":\(entry.size)",
        ]
        if let value = entry.valueJSON { fields.append("\"value\":\(value)") }
        return "{" + fields.joined(separator: ",") + "}"
    }

    static func textLine(_ entry: LogEntry) -> String {
        let value: String
        switch (entry.operation, entry.isSealed) {
        case (.remove, _): value = "(removed)"
        case (.set, true): value = "(sealed, \(entry.size) bytes)"
        case (.set, false): value = entry.valueJSON ?? ""
        }
        return "\(entry.sequence)\t\(ISO8601DateFormatter().string(from: entry.date))\t\(entry.origin.short)\t\(entry.domain)\t\(entry.key)\t\(entry.operation)\t\(value)"
    }

    static func quote(_ text: String) -> String {
        let data = (try? JSONEncoder().encode(text)) ?? Data("\"\"".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
