import ArgumentParser
@_spi(Tools) import Chronicle
import Foundation

extension ChronicleCommand {
    struct Log: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the events of the log, oldest first.",
            discussion: """
                A sealed value is never printed. With --json, one JSON object per line (JSON Lines) with
                sequence, origin (the device: its replica id), writer and counter (the event's identity),
                timestamp, hlc, domain, key, op, policy, sealed, size and, for unsealed sets, value.

                Examples:
                  chronicle log --store ./store
                  chronicle log --key settings.theme --since 2026-11-01 --json
                """)

        @OptionGroup var options: StoreOptions
        @Option(help: "Only events of this key.") var key: String?
        @Option(help: "Only events of this domain: defaults or secrets.") var domain: String?
        @Option(help: ArgumentHelp("Only events at or after this date (ISO 8601) or sequence.", valueName: "DATE|SEQ")) var since: String?
        @Option(help: ArgumentHelp("Only events at or before this date (ISO 8601) or sequence.", valueName: "DATE|SEQ")) var until: String?
        @Flag(help: "JSON Lines: one event per line.") var json = false

        func validate() throws {
            if let domain, !["defaults", "secrets"].contains(domain) { throw ValidationError("--domain is defaults or secrets") }
            for bound in [since, until].compactMap({ $0 }) where UInt64(bound) == nil && parseDate(bound) == nil {
                throw ValidationError("\(bound) is neither a sequence number nor an ISO 8601 date")
            }
        }

        func run() throws {
            let entries = try options.openExisting().logEntries().filter { entry in
                if let key, entry.key != key { return false }
                if let domain, entry.domain != domain { return false }
                if let since, !Self.entry(entry, isAtOrAfter: since) { return false }
                if let until, !Self.entry(entry, isAtOrBefore: until) { return false }
                return true
            }
            for entry in entries { print(json ? jsonSafe(Self.jsonLine(entry)) : Self.textLine(entry)) }
        }

        static func entry(_ entry: LogEntry, isAtOrAfter bound: String) -> Bool {
            if let sequence = UInt64(bound) { return entry.sequence >= sequence }
            return parseDate(bound).map { entry.date >= $0 } ?? true
        }

        static func entry(_ entry: LogEntry, isAtOrBefore bound: String) -> Bool {
            if let sequence = UInt64(bound) { return entry.sequence <= sequence }
            return parseDate(bound).map { entry.date <= $0 } ?? true
        }

        static func jsonLine(_ entry: LogEntry) -> String {
            var fields: [String] = [
                "\"sequence\":\(entry.sequence)",
                "\"origin\":\"\(entry.origin.hex)\"",
                "\"writer\":\"\(entry.writer.hex)\"",
                "\"counter\":\(entry.counter)",
                "\"timestamp\":\"\(iso(entry.date))\"",
                "\"hlc\":\(entry.timestamp.rawValue)",
                "\"domain\":\"\(entry.domain)\"",
                "\"key\":\(jsonString(entry.key))",
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
            return "\(entry.sequence)\t\(iso(entry.date))\t\(entry.origin.short)\t\(entry.domain)\t\(terminalSafe(entry.key))\t\(entry.operation)\t\(terminalSafe(value))"
        }
    }
}
