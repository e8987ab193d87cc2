@testable import Chronicle
import ChronicleFormat
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleTesting
import Foundation
import Testing

/// A transaction of many local changes writes them in passes (every record joins the chain,
/// then every dot, every history link, every view), not one change at a time. What a reader
/// sees must not show it: the same values, histories, chain and log order as one change at a
/// time would leave.
struct BatchCommitOrderTests {
    static let keys = (0..<4).map { Key<Int?>("order.k\($0)", sync: .automaticSmall) }

    /// A random run of sets and removes over four keys (each key written several times in one
    /// batch): committed as one batch, or one change a commit, the stores read the same.
    @Test(arguments: [UInt64(1), 2, 3, 4, 5])
    func aBatchLeavesWhatOneChangeAtATimeLeaves(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let script: [(key: Int, value: Int?)] = (0..<60).map { index in
            (Int.random(in: 0..<4, using: &random), Bool.random(using: &random) ? index : nil)
        }
        try withTemporaryStore { batched, _ in
            try withTemporaryStore { single, _ in
                try batched.write { batch in
                    for step in script { batch[Self.keys[step.key]] = step.value }
                }
                for step in script { try single.set(step.value, for: Self.keys[step.key]) }
                for key in Self.keys {
                    #expect(batched[key] == single[key])
                    #expect(try batched.history(of: key).map(\.value) == single.history(of: key).map(\.value))
                }
                #expect(try batched.verify().isSound)
                #expect(try batched.verify().records == single.verify().records)
            }
        }
    }

    /// A store's first secret makes its first key and keys the chain with a record of its own:
    /// the plain changes before it in the same transaction are in the chain before that record,
    /// the ones after it behind it, as they were made.
    @Test func theFirstSecretOfABatchKeysTheChainWhereItStands() throws {
        try withTemporaryStore { store, _ in
            let changes = [
                try store.change(.dark, for: Keys.theme),
                try store.change(4, for: Keys.pin),
                try store.change(7, for: Keys.launches),
            ]
            _ = try store.eventLog.commit(changes)
            let log = try store.eventLog
            let records = try log.environment.read { txn in
                var records: [LogRecord] = []
                try txn.scan(log.dbs.events) { key, value in
                    records.append(try LogRecord(decoding: value, sequence: UInt64(bigEndianBytes: key) ?? 0))
                    return true
                }
                return records
            }
            let kinds = records.map(\.kind)
            let keys = try records.filter { $0.kind == .event }.map { try $0.event(sequence: 0).key }
            #expect(kinds.firstIndex(of: .chainKey).map { kinds[$0...].filter { $0 == .event }.count } == 2)
            #expect(keys == [Keys.theme.name, Keys.pin.name, Keys.launches.name])
            #expect(try store.verify().isSound)
            #expect(store[Keys.pin] == 4)
        }
    }

    /// An edited `latest` row is repaired by rebuilding the index from the log, which holds
    /// every record of the transaction by then: each key's history is its records, once each.
    @Test func aBatchOverAnEditedIndexRowRepairsIt() throws {
        try withTemporaryStore { store, _ in
            try store.set(1, for: Self.keys[0])
            try HistoryIndexTests.put(
                store, "latest", key: HistoryKey.prefix(domain: .defaults, name: Self.keys[0].name), value: UInt64(999).bigEndianBytes)
            try store.write { batch in
                batch[Self.keys[1]] = 10
                batch[Self.keys[0]] = 2
                batch[Self.keys[1]] = 11
                batch[Self.keys[0]] = 3
            }
            try store.set(4, for: Self.keys[0])
            #expect(try store.history(of: Self.keys[0]).map(\.value) == [1, 2, 3, 4])
            #expect(try store.history(of: Self.keys[1]).map(\.value) == [10, 11])
            #expect(try store.verify().isSound)
        }
    }

    /// A change that expects its key's order reads the view after the changes before it in the
    /// same request: a set of the key ahead of it makes its expectation stale, and nothing of
    /// the request is written (the update then reads again).
    @Test func aChangeThatExpectsAnOrderReadsTheChangesBeforeIt() throws {
        try withTemporaryStore { store, _ in
            let key = Self.keys[3]
            try store.set(1, for: key)
            let log = try store.eventLog
            let order = try log.environment.read { txn in
                try txn.get(log.dbs.view(.defaults), key: Array(key.name.utf8)).flatMap { bytes in bytes.withUnsafeBytes { ViewEntry.order(of: $0) } }
            }
            #expect(order != nil)
            var expecting = try store.change(3, for: key)
            expecting.expectedOrder = .some(order)
            // Alone, the expectation holds; behind a set of its key, it is stale.
            #expect(throws: StaleRead.self) { try log.commit([try store.change(2, for: key), expecting]) }
            #expect(store[key] == 1)
            #expect(try store.history(of: key).map(\.value) == [1])
            _ = try log.commit([expecting])
            #expect(store[key] == 3)
        }
    }

    /// An atomic update reads its key's view first: queued after plain changes of the same key
    /// in one transaction, it reads what they wrote.
    @Test func anUpdateAfterQueuedSetsOfItsKeyReadsThem() async throws {
        try await withTemporaryStore { store, _ in
            for value in 1...50 { store[Self.keys[2]] = value }
            try store.update(Self.keys[2]) { $0 = ($0 ?? 0) + 1000 }
            try await store.flush()
            #expect(store[Self.keys[2]] == 1050)
            #expect(try store.history(of: Self.keys[2]).last?.value == 1050)
        }
    }
}
