@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Synchronization
import Testing

/// Waits for the first element of `stream` that satisfies `accept`; `nil` when none came before
/// `limit` (a bound that tells a deaf observer from a slow one, never a measure of speed).
func firstElement<S: AsyncSequence & Sendable>(
    of stream: S, within limit: Duration = hangGuard, where accept: @escaping @Sendable (S.Element) -> Bool
) async -> S.Element? where S.Element: Sendable {
    await withTaskGroup(of: S.Element?.self) { group in
        group.addTask {
            do {
                for try await element in stream where accept(element) { return element }
            } catch {}
            return nil
        }
        group.addTask {
            try? await Task.sleep(for: limit)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

/// Observation keeps its meaning whatever the log goes through: compaction renumbering it, the
/// drift guard letting a held-back event in late, a restore, re-encoded values.
struct LosslessObservationTests {
    @Test func anObserverHearsReplicatedChangesAfterACompaction() async throws {
        try await withTemporaryStores(2) { stores in
            let (a, b) = (stores[0], stores[1])
            for i in 0..<40 { try a.set("a\(i)", for: .note) }
            let updates = a.updates(of: .note)
            _ = try a.compact(before: Date())  // renumbers the log from 1
            try b.set("from b", for: .note)
            try await Replicator(store: a, peers: [.store(b)]).sync()
            #expect(a[.note] == "from b")
            let heard = await firstElement(of: updates) { $0 == "from b" }
            #expect(heard == "from b", "the observer went deaf after the compaction")
        }
    }

    @Test func anObserverHearsAPromotionAfterALaterLocalChange() async throws {
        var configuration = Store.Configuration()
        configuration.maxClockDrift = .milliseconds(200)
        try await withTemporaryStores(2, configuration: configuration) { stores in
            let (a, b) = (stores[0], stores[1])
            try b.set("b", for: .note)
            let updates = a.updates(of: .note)
            let receipt = try a.importRange(try eventAhead(of: b, by: 1_500, value: "from the future"))
            #expect(receipt.deferred == 1)
            try a.set("local, earlier on the clock", for: .note)
            let heard = await firstElement(of: updates) { $0 == "from the future" }
            #expect(heard == "from the future", "the promoted event was not heard")
            #expect(a[.note] == "from the future")
        }
    }

    @Test func theChangeStreamDeliversAPromotion() async throws {
        var configuration = Store.Configuration()
        configuration.maxClockDrift = .milliseconds(200)
        try await withTemporaryStores(2, configuration: configuration) { stores in
            let (a, b) = (stores[0], stores[1])
            try b.set("b", for: .note)
            _ = try a.importRange(try eventAhead(of: b, by: 1_000, value: "later"))
            let held = try #require(try a.logEntries().first { $0.valueJSON == "\"later\"" })
            #expect(held.isHeldBack && !held.isCurrent)
            let promoted = await firstElement(of: a.changes(after: 0)) { $0.sequence == held.sequence && $0.isCurrent }
            #expect(promoted?.isHeldBack == false)
            #expect(promoted?.valueJSON == "\"later\"")
        }
    }

    @Test func aCheckpointFromBeforeACompactionStartsTheStreamOver() async throws {
        try await withTemporaryStore { store, _ async throws in
            for i in 0..<10 { try store.set(i, for: Key<Int>("stream.\(i % 3)", default: 0)) }
            let entries = try store.logEntries()
            let checkpoint = try #require(entries.last?.checkpoint)
            #expect(checkpoint.chainHash.count == LogRecord.hashLength)
            #expect(entries.allSatisfy { $0.epoch == checkpoint.epoch })
            // Resuming on the same log carries on after the checkpoint.
            try store.set(99, for: Key<Int>("stream.next", default: 0))
            let next = await firstElement(of: store.changes(from: checkpoint)) { _ in true }
            #expect(next?.sequence == checkpoint.sequence + 1)
            // After a compaction the point is gone: the stream starts again, in the new epoch.
            _ = try store.compact(before: Date())
            let again = await firstElement(of: store.changes(from: checkpoint)) { _ in true }
            #expect(again?.sequence == 1 || again?.sequence == 2)
            #expect(again?.epoch != checkpoint.epoch)
            // A checkpoint whose hash is not the log's (a rolled-back or restored log) too.
            var forged = try #require(try store.logEntries().last?.checkpoint)
            forged.chainHash = [UInt8](repeating: 7, count: LogRecord.hashLength)
            let restarted = await firstElement(of: store.changes(from: forged)) { _ in true }
            #expect(restarted?.sequence ?? .max < forged.sequence)
        }
    }

    @Test func aSetValuedObserverHearsNoRepeatWhenTheStoreIsReread() async throws {
        try await withTemporaryStore { store, _ async throws in
            let key = Key<Set<String>>("tags", default: [])
            let tags = Set((0..<40).map { "tag-\($0)" })
            try store.set(tags, for: key)
            let heard = Shared<[Set<String>]>([])
            let updates = store.updates(of: key)
            let observer = Task {
                for await value in updates {
                    heard.withLock { $0.append(value) }
                    if value.contains("last") { return }
                }
            }
            // What another process's commit looks like here: a re-read of every observed key.
            let eventLog = try store.eventLog
            for _ in 0..<20 {
                eventLog.observers.publishReset()
                try store.set(1, for: Key<Int>("other", default: 0))
            }
            try store.set(tags.union(["last"]), for: key)
            await observer.value
            #expect(heard.withLock { $0 } == [tags, tags.union(["last"])])
        }
    }
}
