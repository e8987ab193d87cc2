@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import ChronicleLMDB
import Synchronization
import Testing

struct CorruptFileTests {
    func makeStore(_ directory: URL) throws {
        let store = try Store(directory: directory)
        try store.write { batch in for i in 0..<500 { batch[Key<Int>("k.\(i)", default: 0)] = i } }
    }

    @Test func truncatedZeroedAndGarbageFilesGiveClearErrors() async throws {
        for damage in ["truncate", "zero", "garbage", "empty"] {
            let directory = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            try makeStore(directory)
            let file = directory.appendingPathComponent("data.mdb")
            var data = try Data(contentsOf: file)
            switch damage {
            case "truncate": data = data.prefix(data.count / 2)
            case "zero": data = Data(count: data.count)
            case "garbage": data = Data((0..<data.count).map { UInt8(truncatingIfNeeded: $0 &* 131) })
            default: data = Data()
            }
            try data.write(to: file)
            if damage == "empty" {
                // An empty file is a new store: LMDB initializes it.
                #expect(throws: Never.self) { _ = try Store(directory: directory) }
                continue
            }
            #expect(throws: ChronicleError.self, "\(damage)") { _ = try Store(directory: directory) }
        }
    }
}
