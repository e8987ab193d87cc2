@testable import Chronicle
import ChronicleFormat
@testable import ChronicleLog
import ChronicleSodium
import ChronicleTesting
import ChronicleLMDB
import Dispatch
import Foundation
import Subprocess
import Synchronization
import SystemPackage
import Testing

/// The local write path as apps meet it: any number of plain threads using every write form at
/// once, a process that exits right after writing, a full disk, a store released and reopened
/// with changes still queued.
struct WritePathTests {
    /// Runs `body(thread)` on `count` plain threads (not tasks: the cooperative pool's few threads
    /// hide orderings an app's queues find) and reports whether they all finished. The bound only
    /// tells a stalled store from a working one; it is generous and never measures speed.
    static func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) -> Bool {
        let finished = DispatchGroup()
        for thread in 0..<count {
            finished.enter()
            Thread {
                body(thread)
                finished.leave()
            }.start()
        }
        return finished.wait(timeout: hangGuardDeadline) == .success
    }

    @Test func plainThreadsUsingTheNonThrowingSetterNeverStall() throws {
        var keepEverything = Store.Configuration()
        keepEverything.retention = .forever  // every write stays, to be counted
        try withTemporaryStore(configuration: keepEverything) { store, _ in
            let rounds = 3_000
            let finished = Self.onThreads(4) { thread in
                for i in 1...rounds { store[Key<Int>("threads.\(thread).\(i % 4)", default: 0)] = i }
            }
            #expect(finished, "the writers stalled: the group committer stopped leading")
            try #require(finished)
            try store.eventLog.flush()
            #expect(try store.logEntries().count == 4 * rounds)
            for thread in 0..<4 { #expect(try store.eventLog.committedEntry(.defaults, "threads.\(thread).0") != nil) }
        }
    }

    /// Eight plain threads, each writing its key with every write form in turn, for 30 seconds
    /// (two minutes with `CHRONICLE_RELIABILITY=long`), with an observer per key, compactions, and
    /// other `Store`s opened on the directory; then each writes a last value. Not a measure of
    /// speed: the duration only sets how much of the interleavings it sees.
    @Test func everyWriteFormFromEightThreadsCommitsAndIsHeard() async throws {
        try await withTemporaryStore { store, directory async throws in
            let rounds = Int.max  // the last value of every key
            let seconds = ProcessInfo.processInfo.environment["CHRONICLE_RELIABILITY"] == "long" ? 120.0 : 30.0
            let deadline = Date().addingTimeInterval(seconds)
            let written = Shared<Int>(0)
            let keys = (0..<8).map { Key<Int>("mixed.\($0)", default: -1) }
            let heard = Shared<[Int: Int]>([:])
            let observers = keys.enumerated().map { index, key in
                Task { [store] in
                    for await value in store.updates(of: key) {
                        heard.withLock { $0[index] = value }
                        if value == rounds { return }
                    }
                }
            }
            let failures = Shared<[String]>([])
            let finished = Self.onThreads(8) { thread in
                let key = keys[thread]
                var i = 0
                while Date() < deadline {
                    i += 1
                    do {
                        switch (thread + i) % 6 {
                        case 0: try store.set(i, for: key)
                        case 1: try store.write { batch in batch[key] = i }
                        case 2:
                            store[key] = i
                            try store.eventLog.flush()
                        case 3:
                            // Another store on the same directory: the same log, the same order.
                            let other = try Store(directory: directory)
                            other[key] = i
                        case 4: try store.update(key) { $0 = i }
                        default: store[key] = i
                        }
                    } catch {
                        failures.withLock { $0.append("\(thread).\(i): \(error)") }
                    }
                    if thread == 0, i % 200 == 0 { _ = try? store.compact(before: Date()) }
                }
                written.withLock { $0 += i }
                store[key] = rounds
            }
            #expect(finished, "a writer stalled")
            try #require(finished)
            #expect(failures.withLock { $0 } == [])
            try await store.flush()
            for (index, key) in keys.enumerated() {
                #expect(store[key] == rounds)
                #expect(try store.eventLog.committedEntry(.defaults, key.name) != nil, "\(index)")
            }
            for observer in observers { await observer.value }
            #expect(heard.withLock { $0 } == Dictionary(uniqueKeysWithValues: (0..<8).map { ($0, rounds) }))
            #expect(try store.verify().isSound)
            print("every form from eight threads: \(written.withLock { $0 }) writes in \(Int(seconds)) s")
        }
    }

    @Test func aNormalExitKeepsEveryQueuedWrite() async throws {
        for _ in 0..<5 {
            let directory = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let result = try await Subprocess.run(
                .path(FilePath(try stressExecutable().path)), arguments: ["exit", directory.path],
                output: .string(limit: 1 << 16), error: .string(limit: 1 << 16))
            #expect(result.terminationStatus == .exited(0), "\(result.standardError)")
            let store = try Store(directory: directory)
            for i in 0..<50 { #expect(store[Key<Int>("exit.\(i)", default: -1)] == i) }
        }
    }

    @Test func flushThrowsWhatTheQueuedWritesCouldNotCommit() async throws {
        let ran = try await withTmpfs(size: "4m") { mountPoint in
            let directory = mountPoint.appendingPathComponent("store")
            var configuration = Store.Configuration()
            configuration.initialMapSize = 256 * 1024
            let store = try Store(directory: directory, configuration: configuration)
            let failures = store.writeFailures
            let blob = Data(repeating: 0xAB, count: 16 * 1024)
            for i in 0..<300 { store[Key<Data>("blob.\(i)", default: Data())] = blob }
            let error = await #expect(throws: ChronicleError.self) { try await store.flush() }
            #expect(error?.description.contains("disk holding the store is full") == true, "\(String(describing: error))")
            var iterator = failures.makeAsyncIterator()
            let heard = await iterator.next()
            #expect(heard?.error.description.contains("full") == true)
            // What reads show after the flush is what is committed: nothing that failed.
            var committed = 0
            for i in 0..<300 {
                let key = Key<Data>("blob.\(i)", default: Data())
                let stored = try store.eventLog.committedEntry(.defaults, key.name) != nil
                #expect(store[key].isEmpty == !stored, "\(i)")
                if stored { committed += 1 }
            }
            #expect(committed < 300)
            // A second flush has nothing new to report.
            try await store.flush()
            return committed
        }
        guard let committed = ran else { return }  // mounting not permitted here
        #expect(committed > 0)
    }

    @Test func aReleasedMemberStoreReopensOnTheSameEnvironment() async throws {
        let key = try temporaryKeyFile()
        defer { key.cleanUp() }
        let configuration = Store.Configuration(keySource: .keyFile(key.file))
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let secret = SecretKey<String?>("member.secret")
        for round in 0..<30 {
            do {
                let store = try Store(directory: directory, configuration: configuration)
                for i in 0..<5 { store[Key<Int>("member.\(i)", default: -1)] = round }
                store[secret] = "s\(round)"
            }
            let reopened = try Store(directory: directory, configuration: configuration)
            for i in 0..<5 { #expect(try reopened.value(for: Key<Int>("member.\(i)", default: -1)) == round) }
            #expect(try reopened.value(for: secret) == "s\(round)")
        }
    }

    @Test func anEnvironmentIsNeverOpenedTwiceInOneProcess() throws {
        try withTemporaryStore { store, directory in
            let path = try store.eventLog.path
            #expect(throws: (any Error).self) { _ = try ChronicleLMDB.Environment(path: path) }
            _ = directory
        }
    }
}

/// A value behind a lock that closures on several threads share.
final class Shared<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func withLock<R>(_ body: (inout Value) -> R) -> R { value.withLock { body(&$0) } }
}

/// A sealer that counts how often a commit asks it for its key (it seals nothing).
private final class CountingSealer: EventSealer {
    let asked = Atomic<Int>(0)
    let key: SealingKey

    init() throws {
        let id = try #require(KeyID(bytes: [UInt8](repeating: 7, count: KeyID.length)))
        key = SealingKey(id: id, key: try SecureBytes(randomCount: 32))
    }

    func sealingKey(active: KeyID?, record: (KeyID) throws -> WrappedKey?) throws -> SealingKey {
        asked.add(1, ordering: .relaxed)
        return key
    }

    func seal(_ event: inout Event, with key: SealingKey) throws {}
    func authenticate(_ event: inout Event, with key: SealingKey) throws {}
}

struct SealingKeyLookupTests {
    /// A member's sealed write is sealed and authenticated, and a batch holds many: the commit
    /// asks for the sealing key (reading `dk.active`) once a transaction, not twice a change.
    @Test func aCommitAsksForItsSealingKeyOnce() throws {
        try withTemporaryStore { store, _ in
            let sealer = try CountingSealer()
            let changes = (0..<10).map { index in
                PendingChange(domain: .secrets, key: "sealed.\(index)", policy: .never, op: .set, encoding: 0, payload: [UInt8(index)], sealer: sealer, authenticator: sealer)
            }
            _ = try store.eventLog.commit(changes)
            #expect(sealer.asked.load(ordering: .relaxed) == 1)
        }
    }
}
