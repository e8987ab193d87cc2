import ArgumentParser
@_spi(Tools) import Chronicle
import Foundation

extension EverydayCommands {
    struct Compact: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Drop history the store no longer keeps; current values never change.",
            discussion: """
                A store already drops what each key's retention does not keep, by itself and without \
                renumbering anything; this command is for operators who want more gone at once.

                Drops events older than the cut-off that a later event of the same key outranks. Keeps \
                every key's current event (removes too, however old: a device that was away still learns \
                of them), so no value changes here or on any device that syncs later. Runs in one \
                transaction on a live store and renumbers the log: readers of `changes(from:)` and peers \
                that pull from this store start over. --reclaim then shrinks the file; it refuses while \
                another process has the store open.

                Examples:
                  chronicle compact --store ./store --older-than-days 90
                  chronicle compact --store ./store --before 2026-01-01 --reclaim
                """)

        @OptionGroup var options: StoreOptions
        @Option(help: ArgumentHelp("Drop history older than this date (ISO 8601).", valueName: "DATE")) var before: String?
        @Option(help: "Drop history older than this many days (default 30).") var olderThanDays: Int?
        @Flag(help: "Shrink the data file afterwards (no other process may have the store open).") var reclaim = false
        @Flag(help: "Also drop relay-only records (newer-format items, and second versions of identities, that a store without the group's key keeps to relay).")
        var dropRelayOnly = false

        func validate() throws {
            if before != nil && olderThanDays != nil { throw ValidationError("give --before or --older-than-days, not both") }
            if let before, parseDate(before) == nil { throw ValidationError("--before takes an ISO 8601 date") }
            if (olderThanDays ?? 0) < 0 { throw ValidationError("days cannot be negative") }
        }

        func run() throws {
            let cutoff = before.flatMap(parseDate) ?? Date().addingTimeInterval(-Double(olderThanDays ?? 30) * 86_400)
            let directory = options.directory
            do {
                let store = try options.openExisting()
                let progress = ProgressLine(label: "compact")
                let report = try store.compact(before: cutoff, dropRelayOnly: dropRelayOnly) { done, total in progress.update(done, of: total) }
                progress.finish()
                print("records: \(report.recordsBefore) → \(report.kept + (report.dropped + report.relayOnlyDropped > 0 ? 1 : 0)); dropped \(report.dropped) events")
                if report.relayOnlyDropped > 0 { print("dropped \(report.relayOnlyDropped) relay-only records") }
                if report.checkpointsCarried > 0 { print("carried \(report.checkpointsCarried) push checkpoints over to the new sequence numbers") }
            }
            if reclaim {
                let sizes = try Store.reclaimSpace(directory: directory)
                print("data file: \(sizes.before) → \(sizes.after) bytes")
            }
        }
    }
}
