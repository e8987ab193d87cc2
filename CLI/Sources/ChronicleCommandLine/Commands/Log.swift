import ArgumentParser
@_spi(Tools) import Chronicle
import Foundation

extension EverydayCommands {
    struct Log: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the events of the log, oldest first.",
            discussion: """
                Prints as it reads, a page of records at a time, so the first line comes at once and \
                memory stays flat on a log of any size; --key reads the key's history index instead of \
                the whole log. It does not check the hash chain: `chronicle verify` does. \
                A sealed value is never printed. With --json, one JSON object per line (JSON Lines) with \
                sequence, origin (the device: its replica id), writer and counter (the event's identity), \
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

        /// Records read per page: small enough to print the first line at once, large enough that
        /// a page's read transaction costs nothing beside printing it.
        static let pageSize = 1_000

        func run() throws {
            let store = try options.openExisting()
            let first = max(1, since.flatMap(UInt64.init) ?? 1)
            let last = until.flatMap(UInt64.init) ?? .max
            if let key {
                for entry in try KeysByName(store).logEntries(ofKeyNamed: key) where (first...last).contains(entry.sequence) { emit(entry) }
                return
            }
            var cursor = first - 1
            while cursor < last {
                let (entries, through) = try store.logEntries(after: cursor, limit: Self.pageSize)
                for entry in entries where entry.sequence <= last { emit(entry) }
                guard through > cursor else { return }  // the end of the log
                cursor = through
            }
        }

        /// Prints `entry` when it passes the filters.
        private func emit(_ entry: LogEntry) {
            if let domain, entry.domain != domain { return }
            if let since, UInt64(since) == nil, !Self.entry(entry, isAtOrAfter: since) { return }
            if let until, UInt64(until) == nil, !Self.entry(entry, isAtOrBefore: until) { return }
            print(json ? jsonSafe(Self.jsonLine(entry)) : Self.textLine(entry))
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
