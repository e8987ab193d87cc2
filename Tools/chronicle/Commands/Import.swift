import ArgumentParser
import Chronicle
import Foundation

extension ChronicleCommand {
    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply a range file written by `chronicle export` (or a sync mailbox).",
            discussion: """
                The file is checked whole before anything is applied; events this replica has are skipped.
                Example: chronicle import --store ./other ./changes.range
                """)

        @OptionGroup var options: StoreOptions
        @Argument(help: "The range file.") var file: String

        func run() throws {
            guard let data = FileManager.default.contents(atPath: file) else { throw ValidationError("cannot read \(file)") }
            let progress = ProgressLine(label: "import")
            progress.update(0, of: 1)
            let receipt = try options.open().importRange(data, from: "file \(file)")
            progress.finish()
            print(
                "received \(receipt.received), applied \(receipt.applied), duplicates \(receipt.duplicates), deferred \(receipt.deferred), "
                    + "quarantined \(receipt.quarantined), newer format (kept, not applied) \(receipt.opaque)")
        }
    }
}
