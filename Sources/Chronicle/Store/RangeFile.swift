import ChronicleFormat
import ChronicleLog
import Foundation

/// A file of ranges (docs/FORMAT.md, section 7.4): one range, or a range stream ("CHRNSTRM",
/// version 1, then each range after its length as 8 bytes big-endian), written and read one
/// range at a time so memory holds one range, whatever the size of the log.
enum RangeFile {
    /// The first bytes of a range stream: "CHRNSTRM" and the version.
    static let magic = Array("CHRNSTRM".utf8)
    static let version: UInt8 = 1

    /// Writes the ranges `cut` makes (given the last sequence written, `nil` for the first) up to
    /// sequence `last` to `url` as a private file (mode 0600, replacing any file there
    /// atomically): the first range alone when it holds them all, else a range stream.
    /// - Parameter progress: called after each range with (the last sequence written, the head).
    /// - Returns: the number of bytes written.
    static func write(
        to url: URL, through last: UInt64, progress: ((UInt64, UInt64) -> Void)?, cut: (_ after: UInt64?) throws(ChronicleError) -> EventRange
    ) throws(ChronicleError) -> Int {
        var range = try cut(nil)
        if range.upTo >= min(last, range.head) {
            let bytes = range.encoded()
            try PrivateFiles.replace(bytes, at: url)
            progress?(range.upTo, range.head)
            return bytes.count
        }
        return try mappingErrors {
            try PrivateFiles.replace(at: url) { write in
                try write(magic + [version])
                while true {
                    let bytes = range.encoded()
                    try write(UInt64(bytes.count).bigEndianBytes + bytes)
                    progress?(range.upTo, range.head)
                    guard range.upTo < min(last, range.head) else { return }
                    let previous = range.upTo
                    range = try cut(previous)
                    guard range.upTo > previous else { return }  // nothing further (the log was compacted under us)
                }
            }
        }
    }

    /// Reads a file ``write(to:through:progress:cut:)`` or `chronicle export` wrote and hands
    /// `apply` each range's bytes in order: one range, or a range stream read one range at a
    /// time (what `apply` applied stays applied when a later range fails).
    ///
    /// The file is opened without blocking and must be a regular file: a FIFO or a device is
    /// refused at once. Every length in it is checked before anything is read.
    /// - Parameter progress: called after each range with (bytes read, the file's size).
    /// - Returns: the receipts of every range, added up.
    static func read(
        at url: URL, progress: ((Int, Int) -> Void)?, apply: (Data) throws(ChronicleError) -> RangeReceipt
    ) throws(ChronicleError) -> RangeReceipt {
        let path = url.path
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { throw .io(path: path, reason: "cannot open it to read (\(String(cString: strerror(errno))))") }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { throw .io(path: path, reason: "not a regular file") }
        let size = Int(status.st_size)
        func read(_ count: Int) throws(ChronicleError) -> [UInt8] {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(count)
            while bytes.count < count {
                let chunk: Data?
                do { chunk = try handle.read(upToCount: min(count - bytes.count, 16 << 20)) } catch {
                    throw .io(path: path, reason: "cannot read it (\(error.localizedDescription))")
                }
                guard let chunk, !chunk.isEmpty else { break }
                bytes += chunk
            }
            return bytes
        }
        let head = try read(magic.count + 1)
        guard head.count == magic.count + 1, Array(head.prefix(magic.count)) == magic else {
            // One range: the whole file, at most the largest range.
            guard size <= EventRange.maxEncodedSize else {
                throw .invalidArgument("\(path) is \(size) bytes: a range is at most \(EventRange.maxEncodedSize) bytes, and this is no range stream")
            }
            let receipt = try apply(Data(head + (try read(size - head.count))))
            progress?(size, size)
            return receipt
        }
        guard head.last == version else {
            throw .malformedInput("\(path): range stream version \(head.last ?? 0) is not supported (this build reads 1)")
        }
        var total = RangeReceipt()
        var offset = head.count
        /// What the frames before a bad one applied (they stay applied: each is its own transaction).
        func kept(_ total: RangeReceipt) -> String {
            total.received == 0 ? "" : "; the ranges before it were applied and kept (events applied: \(total.applied))"
        }
        while true {
            let length = try read(8)
            if length.isEmpty { return total }  // the end of the stream
            guard length.count == 8, let count = UInt64(bigEndianBytes: length), count <= UInt64(EventRange.maxEncodedSize) else {
                throw .malformedInput("\(path): a range length at byte \(offset) is truncated or over \(EventRange.maxEncodedSize) bytes\(kept(total))")
            }
            let bytes = try read(Int(count))
            guard bytes.count == Int(count) else { throw .malformedInput("\(path): the range at byte \(offset) is truncated\(kept(total))") }
            do { total.add(try apply(Data(bytes))) } catch {
                // A frame that does not decode stops the import; the frames before it stay applied.
                guard case let .malformedInput(reason) = error else { throw error }
                throw .malformedInput("\(path): the range at byte \(offset): \(reason)\(kept(total))")
            }
            offset += 8 + bytes.count
            progress?(offset, size)
        }    }
}
