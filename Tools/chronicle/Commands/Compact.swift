import ArgumentParser
import Chronicle
import Foundation

extension ChronicleCommand {
    struct Compact: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Drop history the store no longer keeps; current values never change.",
            discussion: """
                Keeps every key's current event, every event newer than the cut-off, tombstones younger than
                the retention, and everything a known peer has not acknowledged. Runs in one transaction on
                a live store. --reclaim then shrinks the file (stop every app using the store first).

                Examples:
                  chronicle compact --store ./store --older-than-days 90
                  chronicle compact --store ./store --before 2026-01-01 --reclaim
                """)

        @OptionGroup var options: StoreOptions
        @Option(help: ArgumentHelp("Drop history older than this date (ISO 8601).", valueName: "DATE")) var before: String?
        @Option(help: "Drop history older than this many days (default 30).") var olderThanDays: Int?
        @Option(help: "Keep tombstones younger than this many days.") var tombstoneRetentionDays: Int = 30
        @Flag(help: "Shrink the data file afterwards (no other process may have the store open).") var reclaim = false

        func validate() throws {
            if before != nil && olderThanDays != nil { throw ValidationError("give --before or --older-than-days, not both") }
            if let before, parseDate(before) == nil { throw ValidationError("--before takes an ISO 8601 date") }
            if tombstoneRetentionDays < 0 || (olderThanDays ?? 0) < 0 { throw ValidationError("days cannot be negative") }
        }

        func run() throws {
            let cutoff = before.flatMap(parseDate) ?? Date().addingTimeInterval(-Double(olderThanDays ?? 30) * 86_400)
            let directory = options.directory
            do {
                let store = try options.open()
                let report = try store.compact(before: cutoff, tombstoneRetention: .seconds(tombstoneRetentionDays * 86_400))
                print("records: \(report.recordsBefore) → \(report.kept + (report.dropped > 0 ? 1 : 0)); dropped \(report.dropped) events")
                if let acknowledged = report.acknowledgedThrough { print("kept everything after sequence \(acknowledged) (not yet acknowledged by every peer)") }
            }
            if reclaim {
                let sizes = try Store.reclaimSpace(directory: directory)
                print("data file: \(sizes.before) → \(sizes.after) bytes")
            }
        }
    }
}
