import ArgumentParser
@_spi(Tools) import Chronicle
import Foundation

extension EverydayCommands {
    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write the syncable events with sequence in [--from, --to] to a range file.",
            discussion: """
                The file is the versioned binary range format replication uses; sealed values stay sealed, \
                .never events are left out. Any number of events fits: a span larger than one range is \
                written as a range stream, one range at a time. Import it on another replica with \
                `chronicle import`.

                Example: chronicle export --store ./store --from 1 --to 500 ./changes.range
                """)

        @OptionGroup var options: StoreOptions
        @Option(help: "The first sequence.") var from: UInt64 = 1
        @Option(help: "The last sequence (default: the head of the log).") var to: UInt64?
        @Argument(help: "The file to write.") var file: String

        func validate() throws {
            if let to, to < from { throw ValidationError("--to must not be before --from") }
        }

        func run() throws {
            let store = try options.openExisting()
            let progress = ProgressLine(label: "export")
            let count = try store.exportFile(sequences: from...(to ?? UInt64.max), to: URL(fileURLWithPath: file)) { done, head in
                progress.update(done, of: max(head, 1))
            }
            progress.finish()
            print("wrote \(count) bytes to \(file) (mode 0600)")
        }
    }
}
