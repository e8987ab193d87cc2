import ArgumentParser
@_spi(Tools) import Chronicle
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
            let data = try Self.readRangeFile(file)
            let progress = ProgressLine(label: "import")
            progress.update(0, of: 1)
            let receipt = try options.open().importRange(data, from: "file \(file)")
            progress.finish()
            print(
                "received \(receipt.received), applied \(receipt.applied), duplicates \(receipt.duplicates), deferred \(receipt.deferred), "
                    + "quarantined \(receipt.quarantined), newer format (kept, not applied) \(receipt.opaque)")
        }

        /// The file's bytes, its size checked before any is read: a regular file of at most the
        /// largest range (256 MiB), else an error saying what it is.
        static func readRangeFile(_ path: String) throws -> Data {
            // Without blocking: opening a FIFO for reading would wait for a writer.
            let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
            guard descriptor >= 0 else {
                throw ChronicleError.io(path: path, reason: "cannot open it to read (\(String(cString: strerror(errno))))")
            }
            let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            var status = stat()
            guard fstat(handle.fileDescriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
                throw ChronicleError.io(path: path, reason: "not a regular file")
            }
            guard status.st_size <= Store.maxRangeFileSize else {
                throw ChronicleError.invalidArgument("\(path) is \(status.st_size) bytes; a range file is at most \(Store.maxRangeFileSize) bytes")
            }
            return try handle.read(upToCount: Int(status.st_size) + 1) ?? Data()
        }
    }
}
