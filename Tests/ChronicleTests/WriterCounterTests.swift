@testable import Chronicle
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleTesting
import Foundation
import Synchronization
import Testing

/// The counters a store's own writer gives its events: only this opening writes as its writer,
/// but another process sharing the file may have imported a carrier's events under the writer's
/// next identities (a row in `dots`), and compacted some of them (a range in `dots`). Local
/// writes skip every such counter instead of failing, in a batch and alone.
struct WriterCounterTests {
    /// The counters of the events `writer` wrote, in log order.
    func counters(of writer: ReplicaID, in store: Store) throws -> [UInt64] {
        try EventRange(decoding: Array(try store.exportRange(after: 0))).events.filter { $0.origin == writer }.map(\.counter)
    }

    /// Takes identities of `writer` as another process's import and compaction would: a row per
    /// counter in `rows`, a compacted range per element of `ranges`.
    func take(_ rows: [UInt64], ranges: [ClosedRange<UInt64>], of writer: ReplicaID, in store: Store) throws {
        let eventLog = try store.eventLog
        try eventLog.environment.write { txn in
            for counter in rows { try txn.put(eventLog.dbs.dots, key: writer.bytes.appendingBigEndian(counter), value: UInt64(0).bigEndianBytes) }
            for range in ranges {
                try txn.put(
                    eventLog.dbs.dots, key: CompactedIdentities.key(origin: writer, last: range.upperBound),
                    value: range.lowerBound.bigEndianBytes)
            }
        }
    }

    /// A store whose writer has written counter 1 (a set of `counter.<name>`), with that key and writer.
    func withWriter(_ name: String, _ body: (Store, Key<Int>, ReplicaID) throws -> Void) throws {
        try withTemporaryStore { store, _ in
            let key = Key<Int>("counter.\(name)", default: 0, sync: .automaticSmall)
            try store.set(1, for: key)
            try body(store, key, try #require(try store.replicaInfo().writer))
        }
    }

    @Test func aBatchSkipsTheCountersOthersTook() throws {
        try withTemporaryStore { store, _ in
            let keys = (0..<8).map { Key<Int>("counter.\($0)", default: 0, sync: .automaticSmall) }
            try store.set(1, for: keys[0])
            let writer = try #require(try store.replicaInfo().writer)
            #expect(try counters(of: writer, in: store) == [1])
            try take([5, 10], ranges: [2...3, 7...8], of: writer, in: store)
            try store.write { batch in for (index, key) in keys.enumerated() { batch[key] = index + 10 } }
            #expect(try counters(of: writer, in: store) == [1, 4, 6, 9, 11, 12, 13, 14, 15])
            #expect(store[keys[7]] == 17)
        }
    }

    @Test func aDurableSetAndAQueuedOneSkipTheCountersOthersTook() async throws {
        try await withTemporaryStore { store, _ in
            let key = Key<Int>("counter.single", default: 0, sync: .automaticSmall)
            try store.set(1, for: key)
            let writer = try #require(try store.replicaInfo().writer)
            try take([2], ranges: [4...6], of: writer, in: store)
            try store.set(2, for: key)  // 3
            try store.set(3, for: key)  // 7: past the range
            store[key] = 4  // 8, queued
            try await store.flush()
            #expect(try counters(of: writer, in: store) == [1, 3, 7, 8])
            #expect(store[key] == 4)
        }
    }

    /// A range that starts below the writer's last counter (it spans counters the log has seen)
    /// takes only what lies above it.
    @Test func aRangeReachingBackTakesOnlyTheCountersAboveTheLastOne() throws {
        try withTemporaryStore { store, _ in
            let key = Key<Int>("counter.back", default: 0, sync: .automaticSmall)
            for value in 1...3 { try store.set(value, for: key) }
            let writer = try #require(try store.replicaInfo().writer)
            try take([], ranges: [1...4], of: writer, in: store)
            try store.write { batch in batch[key] = 4 }
            #expect(try counters(of: writer, in: store) == [1, 2, 3, 5])
        }
    }

    /// A key of another kind (an `R` or `O` row) can begin with the writer's bytes when the writer
    /// id begins with its tag. It is never taken for the end of the writer's rows (a taken counter
    /// behind it is still skipped), and it costs at most the counter its bytes spell, never a walk
    /// over every such key.
    @Test func keysOfAnotherKindUnderTheWritersBytesHideNoTakenCounter() throws {
        try withWriter("among") { store, key, writer in
            let eventLog = try store.eventLog
            try eventLog.environment.write { txn in
                // 25 bytes, sorting between the writer's rows for counters 2 and 3.
                try txn.put(eventLog.dbs.dots, key: writer.bytes.appendingBigEndian(UInt64(2)) + [0], value: UInt64(1).bigEndianBytes)
                // Many more whose counter fields lie past every counter a writer can reach.
                for index in 0..<2_000 {
                    try txn.put(eventLog.dbs.dots, key: writer.bytes + [1] + UInt64(index).bigEndianBytes, value: UInt64(1).bigEndianBytes)
                }
            }
            try take([3], ranges: [], of: writer, in: store)
            try store.write { batch in
                batch[key] = 2
                batch[Key<Int>("counter.other", default: 0, sync: .automaticSmall)] = 3
            }
            #expect(try counters(of: writer, in: store) == [1, 4, 5])
        }
    }

    /// Queued changes commit as several groups of one transaction: the counter and the taken
    /// span go from one group to the next.
    @Test func theGroupsOfOneTransactionShareTheSkips() throws {
        try withWriter("groups") { store, key, writer in
            try take([3, 5], ranges: [7...8], of: writer, in: store)
            func change(_ value: Int) -> PendingChange {
                PendingChange(domain: .defaults, key: key.name, policy: .automaticSmall, op: .set, encoding: ValueEncoding.int.rawValue, payload: Int64(value).bigEndianBytes)
            }
            let results = try store.eventLog.commitGroup([[change(2)], [change(3), change(4)], [], [change(5)]])
            #expect(results.allSatisfy { (try? $0.get()) != nil })
            #expect(try counters(of: writer, in: store) == [1, 2, 4, 6, 9])
            #expect(store[key] == 5)
        }
    }

    /// A row next to a range, and a row inside one: skipped as one span.
    @Test func aRowBesideARangeAndARowInsideOneAreSkipped() throws {
        try withWriter("beside") { store, key, writer in
            try take([2, 6], ranges: [3...7], of: writer, in: store)
            try store.write { batch in batch[key] = 2 }
            #expect(try counters(of: writer, in: store) == [1, 8])
        }
    }

    /// The last counter a writer may use is 2^48. A range reaching it ends the writer's counters
    /// with an error at once (not a walk of 2^48 steps), and so does the counter after the last.
    @Test func countersEndAtTwoToTheFortyEighthWithAnError() throws {
        try withWriter("end") { store, key, writer in
            let eventLog = try store.eventLog
            eventLog.local.writerCounter.withLock { $0 = Event.maxCounter - 1 }
            try store.set(2, for: key)
            #expect(try counters(of: writer, in: store).last == Event.maxCounter)
            #expect(throws: ChronicleError.self) { try store.set(3, for: key) }
            try withTemporaryStore { other, _ in
                try other.set(1, for: key)
                let otherWriter = try #require(try other.replicaInfo().writer)
                try take([], ranges: [5...Event.maxCounter], of: otherWriter, in: other)
                try other.set(2, for: key)  // 2
                try other.write { batch in batch[key] = 3; batch[Key<Int>("counter.end.other", default: 0, sync: .automaticSmall)] = 4 }  // 3, 4
                #expect(throws: ChronicleError.self) { try other.set(5, for: key) }
                #expect(try counters(of: otherWriter, in: other) == [1, 2, 3, 4])
                #expect(other[key] == 3)
            }
        }
    }
}
