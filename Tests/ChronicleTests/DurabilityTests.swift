@testable import Chronicle
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
        let committer = GroupCommitter<Int, Int>(maxGroup: 64) { requests in
            let first = groups.withLock { groups in
                groups.append(requests)
                return groups.count == 1
            }
            if first { release.wait() }
            return requests.map { .success($0 * 10) }
        }
        let results = Mutex<[Int]>([])
        let done = DispatchGroup()
        DispatchQueue.global().async(group: done) {
            let value = (try? committer.submit(0)) ?? -1
            results.withLock { $0.append(value) }
        }
        while groups.withLock({ $0.count }) == 0 { usleep(1000) }
        for i in 1...7 {
            DispatchQueue.global().async(group: done) {
                let value = (try? committer.submit(i)) ?? -1
                results.withLock { $0.append(value) }
            }
        }
        // Wait until the seven are queued behind the blocked leader, then let it finish.
        while committer.queuedCount < 7 { usleep(1000) }
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

struct ProcessTests {
    @Test func anotherProcessReadsAndWritesTheSameStore() async throws {
        try await withTemporaryStore { store, directory async throws in
            store[.theme] = .dark
            let get = try await runChronicle(["get", "settings.theme", "--store", directory.path])
            #expect(get.status == 0)
            #expect(get.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "\"dark\"")

            let set = try await runChronicle(["set", "settings.theme", "light", "--store", directory.path])
            #expect(set.status == 0, "\(set.stderr)")
            #expect(store[.theme] == .light)  // the other process's commit invalidates the read cache
            let history = try store.history(of: .theme)
            #expect(history.count == 2)
            #expect(history.allSatisfy { $0.origin == history[0].origin })  // one replica id, shared by both processes

            let rm = try await runChronicle(["rm", "settings.theme", "--store", directory.path])
            #expect(rm.status == 0)
            #expect(store[.theme] == .system)
            #expect(try store.verify().isSound)
        }
    }

    @Test func missingValueExitsNonZero() async throws {
        try await withTemporaryStore { _, directory async throws in
            let get = try await runChronicle(["get", "nothing.here", "--store", directory.path])
            #expect(get.status == 1)
            #expect(get.stderr.contains("no value"))
        }
    }
}

struct MapGrowthTests {
    @Test func storeGrowsPastItsInitialMap() async throws {
        var configuration = Store.Configuration()
        configuration.initialMapSize = 256 * 1024
        try await withTemporaryStore(configuration: configuration) { store, _ async throws in
            let payload = Data(repeating: 0xAB, count: 32 * 1024)
            for i in 0..<120 {
                try store.set(payload, for: Key<Data>("blob.\(i)", default: Data()))
            }
            try store.write { batch in
                for i in 0..<40 { batch[Key<Data>("batch.\(i)", default: Data())] = payload }
            }
            #expect(try store.eventLog.environment.mapSize > 4 << 20)
            #expect(store[Key<Data>("blob.0", default: Data())] == payload)
            #expect(store[Key<Data>("batch.39", default: Data())] == payload)
            #expect(try store.verify().isSound)
        }
    }
}

struct CorruptionTests {
    /// Flips one bit in every occurrence of `needle` in the store's data file (LMDB's copy-on-write
    /// can leave stale copies of a page; the live one is among them).
    func flipByte(after needle: [UInt8], in directory: URL) throws {
        let file = directory.appendingPathComponent("data.mdb")
        let bytes = [UInt8](try Data(contentsOf: file))
        var altered = bytes
        let hits = (0...(bytes.count - needle.count)).filter { bytes[$0..<$0 + needle.count].elementsEqual(needle) }
        try #require(!hits.isEmpty)
        for index in hits { altered[index + needle.count - 1] ^= 0x01 }
        let handle = try FileHandle(forWritingTo: file)  // in place: the file keeps its inode
        try handle.write(contentsOf: Data(altered))
        try handle.close()
    }

    @Test func alteredRecordIsReportedWithItsSequence() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let marker = "MARKER-7f3a9c"
        let key = Key<String>("victim", default: "")
        do {
            let store = try Store(directory: directory)
            try store.set(1, for: .launches)
            try store.set(marker, for: key)  // sequence 2
            try store.set(3, for: .launches)
        }
        // In the log record the payload follows the key name and its 4-byte length.
        try flipByte(after: Array("victim".utf8) + UInt32(marker.utf8.count).bigEndianBytes + Array(marker.utf8), in: directory)

        let store = try Store(directory: directory)
        let report = try store.verify()
        #expect(!report.isSound)
        #expect(report.firstBadSequence == 2)

        #expect {
            try store.rebuildViews()
        } throws: { error in
            guard case ChronicleError.corruptRecord(2, _) = error else { return false }
            return true
        }
        #expect(store[key] == marker)  // nothing was applied by the failed rebuild
        let verify = try await runChronicle(["verify", "--store", directory.path])
        #expect(verify.status == 1)
        #expect(verify.stderr.contains("sequence: 2"))
    }

    @Test func undecodableRecordIsReportedNotCrashed() async throws {
        try await withTemporaryStore { store, _ async throws in
            try store.set(.dark, for: .theme)
            let eventLog = try store.eventLog
            // Write a record whose body does not decode, with a valid chain hash: decoding must fail by name.
            try eventLog.environment.write { txn in
                var head = try LogHead.read(txn, eventLog.dbs)
                head.sequence += 1
                let body: [UInt8] = [1, 2, 3]
                let hash = LogRecord.chainHash(previous: head.chain, sequence: head.sequence, kind: .event, body: body, key: nil)
                try txn.put(eventLog.dbs.events, key: head.sequence.bigEndianBytes, value: LogRecord(kind: .event, body: body, hash: hash).encoded())
                head.chain = hash
                try head.write(txn, eventLog.dbs)
            }
            let report = try store.verify()
            #expect(report.firstBadSequence == 2)
            #expect(throws: ChronicleError.self) { try store.rebuildViews() }
            #expect(throws: ChronicleError.self) { try store.logEntries() }
            #expect(store[.theme] == .dark)
        }
    }

    @Test func rebuiltViewsEqualTheViewsBefore() async throws {
        try await withTemporaryStore { store, _ async throws in
            for i in 0..<50 {
                store[Key<Int>("n.\(i % 7)", default: 0)] = i
                if i % 5 == 0 { try store.remove(Key<Int>("n.\(i % 3)", default: 0)) }
            }
            store[.profile] = Profile(name: "x", tags: [], scores: [:], nested: nil)
            let before = (0..<7).map { store[Key<Int>("n.\($0)", default: -1)] }
            try store.rebuildViews()
            let after = (0..<7).map { store[Key<Int>("n.\($0)", default: -1)] }
            #expect(before == after)
            #expect(store[.profile]?.name == "x")
            #expect(try store.history(of: Key<Int>("n.0", default: 0)).count > 5)
            #expect(try store.verify().isSound)
        }
    }
}
