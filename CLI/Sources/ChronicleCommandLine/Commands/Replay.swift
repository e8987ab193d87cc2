import ArgumentParser
@_spi(Tools) import Chronicle
import Foundation

extension EverydayCommands {
    struct Replay: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Rebuild the views from the log, or write a point-in-time copy.",
            discussion: """
                Without --into, drops the views and rebuilds them from the log in one transaction: on a \
                corrupt record nothing changes and the sequence is named. \
                With --into DIR, writes a new store holding the log up to and including --until (a \
                sequence, or an ISO 8601 date: events stamped at or before it) and its views.

                Examples:
                  chronicle replay --store ./store
                  chronicle replay --store ./store --until 42 --into ./store-at-42
                  chronicle replay --store ./store --until 2026-11-01T00:00:00Z --into ./november
                """)

        @OptionGroup var options: StoreOptions
        @Option(help: ArgumentHelp("The last sequence or date to include (with --into).", valueName: "SEQ|DATE")) var until: String?
        @Option(help: ArgumentHelp("Write a point-in-time copy into this new directory.", valueName: "DIR")) var into: String?

        func validate() throws {
            if until != nil && into == nil { throw ValidationError("--until needs --into DIR (a replay in place always uses the whole log)") }
            if let until, UInt64(until) == nil, parseDate(until) == nil { throw ValidationError("--until takes a sequence number or an ISO 8601 date") }
        }

        func run() throws {
            let store = try options.openExisting()
            guard let into else {
                try store.rebuildViews()
                print("views rebuilt from \(try store.statistics().records) records; \(try store.verify())")
                return
            }
            var point = PointInTime.end
            if let until { point = UInt64(until).map(PointInTime.sequence) ?? parseDate(until).map(PointInTime.date) ?? .end }
            let progress = ProgressLine(label: "replay")
            let copy = try store.copy(to: URL(fileURLWithPath: into, isDirectory: true), through: point) { done, total in
                progress.update(done, of: total)
            }
            progress.finish()
            let stats = try copy.statistics()
            print("wrote \(into): \(stats.records) records, \(stats.defaultsKeys + stats.secretKeys) keys, replica \(stats.replicaID.short)")
        }
    }
}
