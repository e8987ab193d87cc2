@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Testing

/// `store.changes(after:)`, the log as a lossless, resumable stream, and several keys observed
/// at once.
struct ChangeStreamTests {
    /// Every event arrives once, in log order, whoever wrote it and however fast: more than a
    /// page of history, concurrent writers, another `Store` on the directory, a replicated
    /// import and another process.
    @Test func everyEventArrivesOnceInOrder() async throws {
        try await withTemporaryStore { store, directory async throws in
            for i in 1...300 { store[Key<Int>("history.\(i % 7)", default: 0, sync: .automaticSmall)] = i }  // more than a page
            try await store.flush()
            let stream = store.changes(after: 0)
            let writers = (0..<4).map { writer in
                Task.detached {
                    for i in 0..<25 { try store.set(i, for: Key<Int>("writer.\(writer)", default: -1, sync: .automaticSmall)) }
                }
            }
            let second = try Store(directory: directory)
            try second.set("other store", for: Key<String>("second", default: "", sync: .automaticSmall))
            let peerDirectory = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: peerDirectory) }
            let peer = try Store(directory: peerDirectory)
            try peer.set("from a peer", for: Key<String>("peer", default: "", sync: .automaticSmall))
            try await Replicator(store: store, peers: [.store(peer)]).sync()
            let tool = try await runChild(["set", directory.path, "tool", "from another process"])
            #expect(tool.status == 0, "\(tool.stderr)")
            for writer in writers { try await writer.value }

            let expected = 300 + 100 + 3
            let heard = await collect(stream) { $0.count == expected }
            #expect(heard.count == expected)
            #expect(heard.map(\.sequence) == Array(1...UInt64(expected)), "every event once, in log order")
            #expect(Set(heard.map(\.key)).isSuperset(of: ["second", "peer", "tool", "writer.0", "writer.3"]))
            for writer in 0..<4 {
                let values = try heard.filter { $0.key == "writer.\(writer)" }.map { try $0.value(as: Int.self) }
                #expect(values == Array(0..<25), "each writer's values in its order")
            }
            #expect(try heard.first { $0.key == "tool" }?.value(as: String.self) == "from another process")
        }
    }

    /// A consumer that keeps the sequence of the last change it handled resumes there, and a
    /// slow consumer loses nothing.
    @Test func resumesFromACheckpointAndWaitsForNewCommits() async throws {
        try await withTemporaryStore { store, _ async throws in
            let key = Key<Int?>("counter", sync: .automaticSmall)
            for i in 1...10 { try store.set(i, for: key) }
            try store.remove(key)
            let first = await collect(store.changes()) { $0.count == 5 }
            let checkpoint = try #require(first.last?.sequence)
            let resumed = store.changes(after: checkpoint)
            let slowReader = Task {
                var heard: [Int?] = []
                for await change in resumed {
                    try await Task.sleep(for: .milliseconds(2))
                    heard.append(try change.value(as: Int.self))
                    if heard.count == 16 { break }
                }
                return heard
            }
            for i in 11...20 { store[key] = i }  // non-throwing: in the stream once committed
            let heard = try await slowReader.value
            #expect(heard == [6, 7, 8, 9, 10, nil] + (11...20).map { $0 })
        }
    }

    /// A cancelled stream ends and leaves the log's observers; sealed values never show.
    @Test func cancellingEndsTheStreamAndSealedValuesStaySealed() async throws {
        try await withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, _ async throws in
            try store.set("s3cret", for: .apiToken)
            let eventLog = try store.eventLog
            let heard = Shared<[LogEntry]>([])
            let (first, firstHeard) = AsyncStream<Void>.makeStream()
            let reader = Task {
                for await change in store.changes() {
                    heard.withLock { $0.append(change) }
                    firstHeard.yield()
                }
            }
            // The stream subscribes before it reads the log: once it hands out the change it
            // read, it waits for more.
            for await _ in first { break }
            #expect(!eventLog.observers.isEmpty)
            reader.cancel()
            await reader.value
            let seen = heard.withLock { $0 }
            #expect(seen.map(\.key) == ["auth.token"])
            #expect(seen.first?.valueJSON == nil)
            #expect(throws: ChronicleError.self) { try seen.first?.value(as: String.self) }
            #expect(eventLog.observers.isEmpty, "the stream left the hub")
        }
    }

    /// Each element holds every key's value after a change of any of them.
    @Test func severalKeysAtOnce() async throws {
        try await withTemporaryStore { store, _ async throws in
            store[.theme] = .dark
            var updates = store.updates(of: .theme, .launches).makeAsyncIterator()
            func next(until done: (Theme, Int) -> Bool) async -> (Theme, Int)? {
                while let (theme, launches) = await updates.next() {
                    if done(theme, launches) { return (theme, launches) }
                }
                return nil
            }
            #expect(await next { _, _ in true }.map { $0 == (.dark, 0) } == true, "the current values first")
            try store.set(1, for: .launches)
            #expect(await next { $1 == 1 }.map { $0 == (.dark, 1) } == true)
            try store.set(.light, for: .theme)
            #expect(await next { theme, _ in theme == .light }.map { $0 == (.light, 1) } == true)
            try store.set(2, for: .launches)
            #expect(await next { $1 == 2 }.map { $0 == (.light, 2) } == true)
        }
    }
}

// MARK: - Compaction and replicated order

extension ChangeStreamTests {
    /// A live stream goes silent after a compaction: the log is renumbered from 1, the
    /// iterator's cursor stays at the old head, so every new event (sequence <= cursor) is
    /// skipped until the log grows past it.
    @Test func aLiveChangeStreamHearsCommitsAfterACompaction() async throws {
        try await withTemporaryStore { store, _ async throws in
            let counter = Key<Int>("counter", default: 0, sync: .automaticSmall)
            for i in 1...50 { try store.set(i, for: counter) }
            let stream = store.changes(after: 0)
            // The reader says when it has heard all 50: the compaction comes after, whatever the scheduling.
            let (readAll, allRead) = AsyncStream<Void>.makeStream()
            let reader = Task {
                var keys: [String] = []
                for await change in stream {
                    keys.append(change.key)
                    if keys.count == 50 { allRead.finish() }
                    if change.key == "after" { break }
                }
                allRead.finish()
                return keys
            }
            let guardTask = Task {
                try? await Task.sleep(for: hangGuard)  // fails a stream that never hears it; not a measure
                reader.cancel()
            }
            defer { guardTask.cancel() }
            for await _ in readAll {}
            #expect(try store.compact().dropped == 49)
            try store.set("new", for: Key<String>("after", default: "", sync: .automaticSmall))
            let keys = await reader.value
            #expect(keys.last == "after", "the stream missed the event committed after the compaction (heard \(keys.count): \(keys.suffix(3)))")
        }
    }

    /// The stream is the log, not the values: a replicated event older on the clock than the
    /// key's current value arrives after it, and a consumer that projects changes in stream order
    /// (the README's `project(change)`) ends with a value the store does not hold. Nothing in
    /// `LogEntry` says the event lost.
    @Test func projectingTheStreamInOrderGivesTheStoresValues() async throws {
        try await withTemporaryStores(2) { stores in
            let (a, b) = (stores[0], stores[1])
            let key = Key<String>("theme.name", default: "", sync: .automaticSmall)
            try a.set("older", for: key)
            try await Task.sleep(for: .milliseconds(5))
            try b.set("newer", for: key)
            try await Replicator(store: b, peers: [.store(a)]).sync()
            #expect(b[key] == "newer")
            let heard = await gatherValues(b.changes(after: 0)) { $0.count == 2 }
            var projected: [String: String] = [:]
            for change in heard where change.operation == .set && change.isCurrent { projected[change.key] = try change.value(as: String.self) }
            #expect(heard.filter(\.isCurrent).count == 1, "the older replicated event says it is not current")
            #expect(projected[key.name] == b[key], "the projection holds \(projected[key.name] ?? "nil"), the store \(b[key])")
        }
    }
}
