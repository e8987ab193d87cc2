import ArgumentParser
@_spi(Tools) import Chronicle
import Foundation

extension EverydayCommands {
    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply a range file written by `chronicle export` (or a sync mailbox).",
            discussion: """
                Each range is checked whole before anything of it is applied; events this replica has are \
                skipped. A range stream (a large export) is read and applied one range at a time, so an \
                interrupted import keeps what it applied and a second run skips it.

                Example: chronicle import --store ./other ./changes.range
                """)

        @OptionGroup var options: StoreOptions
        @Argument(help: "The range file.") var file: String

        func run() throws {
            let progress = ProgressLine(label: "import")
            let receipt = try options.open().importFile(at: URL(fileURLWithPath: file)) { done, total in
                progress.update(UInt64(done), of: UInt64(max(total, 1)))
            }
            progress.finish()
            print(
                "received \(receipt.received), applied \(receipt.applied), duplicates \(receipt.duplicates), deferred \(receipt.deferred), "
                    + "quarantined \(receipt.quarantined), newer format (kept, not applied) \(receipt.opaque)")
        }
    }
}
