import Chronicle
import Foundation
import Testing
import ToolsTestSupport

/// `chronicle verify` on a damaged store: a clear error and a non-zero status, never a crash.
struct ToolVerifyTests {
    /// A data file truncated, zeroed or overwritten: the tool reports a storage error.
    @Test func aDamagedDataFileIsAStorageError() async throws {
        for damage in ["truncate", "zero", "garbage"] {
            let directory = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            do {
                let store = try Store(directory: directory)
                try store.write { batch in for i in 0..<500 { batch[Key<Int>("k.\(i)", default: 0)] = i } }
            }
            let file = directory.appendingPathComponent("data.mdb")
            var data = try Data(contentsOf: file)
            switch damage {
            case "truncate": data = data.prefix(data.count / 2)
            case "zero": data = Data(count: data.count)
            default: data = Data((0..<data.count).map { UInt8(truncatingIfNeeded: $0 &* 131) })
            }
            try data.write(to: file)
            let tool = try await runChronicle(["verify", "--store", directory.path])
            #expect(tool.status != 0 && tool.stderr.contains("storage error"), "\(damage): \(tool.stderr)")
        }
    }

    /// One bit flipped in a record's payload: verify exits 1 and names the record's sequence.
    @Test func anAlteredRecordIsReportedWithItsSequence() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let marker = "MARKER-7f3a9c"
        do {
            let store = try Store(directory: directory)
            try store.set(1, for: Key<Int>("launches", default: 0))
            try store.set(marker, for: Key<String>("victim", default: ""))  // sequence 2
            try store.set(3, for: Key<Int>("launches", default: 0))
        }
        // In the log record the payload follows the key name and its 4-byte big-endian length.
        let needle = Array("victim".utf8) + [0, 0, 0, UInt8(marker.utf8.count)] + Array(marker.utf8)
        let file = directory.appendingPathComponent("data.mdb")
        var bytes = [UInt8](try Data(contentsOf: file))
        let hits = (0...(bytes.count - needle.count)).filter { bytes[$0..<$0 + needle.count].elementsEqual(needle) }
        try #require(!hits.isEmpty)
        // Every copy (LMDB's copy-on-write can leave stale pages; the live one is among them).
        for index in hits { bytes[index + needle.count - 1] ^= 0x01 }
        let handle = try FileHandle(forWritingTo: file)  // in place: the file keeps its inode
        try handle.write(contentsOf: Data(bytes))
        try handle.close()

        let verify = try await runChronicle(["verify", "--store", directory.path])
        #expect(verify.status == 1)
        #expect(verify.stderr.contains("sequence: 2"))
    }
}
