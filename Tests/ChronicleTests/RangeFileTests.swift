@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Testing

/// Export files of any size: one range when the span fits one, else a range stream written and
/// read one range at a time; every length checked before anything is read.
struct RangeFileTests {
    static func key(_ i: Int) -> Key<Int> { Key<Int>("file.\(i)", default: -1, sync: .manual) }

    /// 40,000 events do not fit one range (32,768 items): the file used to be refused with
    /// "export up to …"; now it is a range stream that imports whole.
    @Test func aSpanLargerThanOneRangeExportsAndImportsWhole() async throws {
        try await withTemporaryStores(2) { stores in
            let (source, target) = (stores[0], stores[1])
            for chunk in 0..<8 {
                try source.write { batch in for i in 0..<5_000 { batch[Self.key(chunk * 5_000 + i)] = chunk * 5_000 + i } }
            }
            let folder = temporaryStoreDirectory()
            defer { try? FileManager.default.removeItem(at: folder) }
            let file = folder.appendingPathComponent("all.range")
            var steps = 0
            let written = try source.exportFile(sequences: 1...UInt64.max, to: file) { _, _ in steps += 1 }
            #expect(steps == 2, "two ranges")
            let bytes = try Data(contentsOf: file)
            #expect(bytes.count == written)
            #expect(Array(bytes.prefix(8)) == Array("CHRNSTRM".utf8))
            #expect(throws: ChronicleError.self) { try source.exportFile(sequences: 1...UInt64.max) }  // the in-memory form: one range only

            let receipt = try target.importFile(at: file)
            #expect(receipt.applied == 40_000)
            #expect(target[Self.key(39_999)] == 39_999 && target[Self.key(0)] == 0)
            #expect(try target.importFile(at: file).duplicates == 40_000, "a second import changes nothing")

            // A span that fits is one plain range, as before.
            let small = folder.appendingPathComponent("small.range")
            try source.exportFile(sequences: 1...10, to: small)
            #expect(Array(try Data(contentsOf: small).prefix(8)) == Array("CHRNRNGE".utf8))
        }
    }

    /// Hostile streams: a length past the limit, a truncated range, an unknown version: a clear
    /// error, nothing allocated for the claimed size, and what came before is kept.
    @Test func hostileStreamsAreRefusedByLength() async throws {
        try await withTemporaryStores(2) { stores in
            let (source, target) = (stores[0], stores[1])
            try source.write { batch in for i in 0..<10 { batch[Self.key(i)] = i } }
            let range = Array(try source.exportFile(sequences: 1...UInt64.max))
            let folder = temporaryStoreDirectory()
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let magic = Array("CHRNSTRM".utf8)
            let cases: [(String, [UInt8], String)] = [
                ("huge", magic + [1] + UInt64.max.bigEndianBytes, "over"),
                ("truncated", magic + [1] + UInt64(range.count).bigEndianBytes + range.prefix(range.count / 2), "truncated"),
                ("version", magic + [9], "version 9"),
                ("half-length", magic + [1] + UInt64(range.count).bigEndianBytes + range + [0, 0, 1], "truncated"),
            ]
            for (name, bytes, message) in cases {
                let file = folder.appendingPathComponent("\(name).range")
                try Data(bytes).write(to: file)
                #expect {
                    try target.importFile(at: file)
                } throws: { error in
                    "\(error)".contains(message)
                }
            }
            // The whole range before the truncated length was applied and kept.
            #expect(target[Self.key(9)] == 9)
        }
    }
}
