@testable import Chronicle
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleTesting
import Foundation
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
    /// id begins with its tag: it is passed over, not taken for the end of the writer's rows.
    @Test func aKeyOfAnotherKindAmongTheWritersRowsHidesNoTakenCounter() throws {
        try withTemporaryStore { store, _ in
            let key = Key<Int>("counter.among", default: 0, sync: .automaticSmall)
            try store.set(1, for: key)
            let writer = try #require(try store.replicaInfo().writer)
            let eventLog = try store.eventLog
            try eventLog.environment.write { txn in
                // 25 bytes, sorting between the writer's rows for counters 2 and 3.
                try txn.put(eventLog.dbs.dots, key: writer.bytes.appendingBigEndian(UInt64(2)) + [0], value: UInt64(1).bigEndianBytes)
            }
            try take([3], ranges: [], of: writer, in: store)
            try store.write { batch in
                batch[key] = 2
                batch[Key<Int>("counter.other", default: 0, sync: .automaticSmall)] = 3
            }
            #expect(try counters(of: writer, in: store) == [1, 2, 4])
        }
    }
}
