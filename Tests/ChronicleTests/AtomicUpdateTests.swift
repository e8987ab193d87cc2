@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Subprocess
import SystemPackage
import Testing

/// `store.update(key) { … }` is one read-modify-write, across threads and processes; a batch
/// reads its own changes.
struct AtomicUpdateTests {
    @Test func twoProcessesIncrementingLoseNoUpdate() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try Store(directory: directory)  // created before the children race to create it
        let tool = try stressExecutable()
        let results = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    let result = try await Subprocess.run(
                        .path(FilePath(tool.path)), arguments: ["increment", directory.path],
                        output: .string(limit: 1 << 16), error: .string(limit: 1 << 16))
                    return result.standardOutput + result.standardError
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.allSatisfy { $0.contains("ack done") }, "\(results)")
        let store = try Store(directory: directory)
        #expect(store[Key<Int>("inc", default: 0)] == 600)
    }

    @Test func threadsIncrementingLoseNoUpdate() throws {
        try withTemporaryStore { store, _ in
            let key = Key<Int>("threads.inc", default: 0, retention: .forever)  // every update stays, to be counted
            let finished = WritePathTests.onThreads(4) { thread in
                for i in 0..<100 {
                    // Non-throwing writes of the same key in between: update waits for them.
                    if i % 10 == 0 { store[Key<Int>("threads.other.\(thread)", default: 0)] = i }
                    _ = try? store.update(key) { $0 += 1 }
                }
            }
            try #require(finished, "an updater stalled")
            #expect(store[key] == 400)
            #expect(try store.history(of: key).count == 400)
        }
    }

    @Test func updateSeesAQueuedChangeAndRethrowsWhatTheBodyThrows() throws {
        struct Refused: Error {}
        try withTemporaryStore { store, _ in
            let key = Key<Int>("queued.inc", default: 0)
            store[key] = 41  // queued, not yet committed
            #expect(try store.update(key) { $0 += 1 } == 42)
            #expect(throws: Refused.self) { try store.update(key) { _ in throw Refused() } }
            #expect(store[key] == 42)
            let draft = Key<String?>("queued.draft")
            try store.set("x", for: draft)
            try store.update(draft) { $0 = nil }  // nil removes
            #expect(!store.hasValue(for: draft))
        }
    }

    @Test func aBatchReadsItsOwnChangesThenTheStore() throws {
        try withTemporaryStore { store, _ in
            try store.set(5, for: .launches)
            try store.write { batch in
                #expect(batch[.launches] == 5)
                batch[.launches] += 1
                #expect(batch[.launches] == 6)
                batch[.draft] = "new"
                #expect(batch[.draft] == "new")
                try batch.remove(.draft)
                #expect(batch[.draft] == nil)
            }
            #expect(store[.launches] == 6)
        }
    }
}
