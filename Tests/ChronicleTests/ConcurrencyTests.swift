@testable import Chronicle
@testable import ChronicleLog
import Dispatch
import ChronicleTesting
import Foundation
import ChronicleLMDB
import Synchronization
import Testing

struct ConcurrencyTests {
    @Test func manyThreadsWritingAndReading() async throws {
        try await withTemporaryStore { store, _ async throws in
            let writers = 8
            let perWriter = 40
            await withTaskGroup(of: Void.self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        let key = Key<Int>("counter.\(writer)", default: -1)
                        for i in 0..<perWriter {
                            store[key] = i
                            #expect(store[key] >= i)  // a write is visible once set returns
                        }
                    }
                }
                for reader in 0..<4 {
                    group.addTask {
                        for i in 0..<200 { _ = store[Key<Int>("counter.\((reader + i) % writers)", default: -1)] }
                    }
                }
            }
            for writer in 0..<writers {
                #expect(store[Key<Int>("counter.\(writer)", default: -1)] == perWriter - 1)
            }
            #expect(try store.logEntries().count == writers * perWriter)
            #expect(try store.verify().isSound)
        }
    }

    @Test func groupCommitPutsQueuedCallersInOneGroup() async throws {
        // The first group blocks until seven more callers are queued; they must all share the second group.
        let groups = Mutex<[[Int]]>([])
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let committer = GroupCommitter<Int, Int>(maxGroup: 64) { requests in
            let first = groups.withLock { groups in
                groups.append(requests)
                return groups.count == 1
            }
            if first {
                started.signal()
                release.wait()
            }
            return requests.map { .success($0 * 10) }
        }
        let results = Mutex<[Int]>([])
        let done = DispatchGroup()
        DispatchQueue.global().async(group: done) {
            let value = (try? committer.submit(0)) ?? -1
            results.withLock { $0.append(value) }
        }
        started.wait()  // the first group runs, blocked
        for i in 1...7 {
            DispatchQueue.global().async(group: done) {
                let value = (try? committer.submit(i)) ?? -1
                results.withLock { $0.append(value) }
            }
        }
        // Wait until the seven are queued behind the blocked leader, then let it finish.
        committer.waitUntilQueued { $0 >= 7 }
        release.signal()
        done.wait()
        #expect(results.withLock { $0.sorted() } == [0, 10, 20, 30, 40, 50, 60, 70])
        let recorded = groups.withLock { $0 }
        #expect(recorded.count == 2)
        #expect(recorded.last?.sorted() == [1, 2, 3, 4, 5, 6, 7])
    }

    @Test func concurrentSetsShareCommits() async throws {
        try await withTemporaryStore { store, _ async throws in
            let before = try store.eventLog.environment.lastTransactionID
            await withTaskGroup(of: Void.self) { group in
                for writer in 0..<8 {
                    group.addTask {
                        for i in 0..<25 { store[Key<Int>("shared.\(writer)", default: 0)] = i }
                    }
                }
            }
            let commits = try store.eventLog.environment.lastTransactionID - before
            #expect(try store.logEntries().count == 200)
            #expect(commits <= 200)  // never more commits than events; usually far fewer
        }
    }
}
