@testable import Chronicle
import ChronicleTesting
import Foundation
import Testing

/// Names the store keeps apart by their bytes that Swift's `String` calls equal (canonical
/// equivalence): an NFC and an NFD spelling of one word, and an ASCII name beside one spelled
/// with U+212A KELVIN SIGN, which decomposes to "K". A peer can send either spelling; reads and
/// observers must keep them apart as the log, replay and compaction do.
struct CanonicallyEqualNameTests {
    static let spellings = zip(["caf\u{E9}", "Key"], ["cafe\u{301}", "\u{212A}ey"])

    /// The read cache answered the second spelling's read with the first's value.
    @Test(arguments: spellings) func eachSpellingReadsItsOwnValue(first: String, second: String) throws {
        try withTemporaryStore { store, _ throws in
            let (key, twin) = (Key<Int>(first, default: 0), Key<Int>(second, default: 0))
            try store.set(1, for: key)
            try store.set(2, for: twin)
            // No commit between these reads: each is answered from the cache after the first.
            #expect(store[key] == 1)
            #expect(store[twin] == 2)
            #expect(store[key] == 1)
            #expect(store[twin] == 2)
        }
    }

    @Test(arguments: spellings) func aPropertyWrapperReadsItsOwnSpelling(first: String, second: String) throws {
        try withTemporaryStore { store, _ throws in
            try store.set(1, for: Key<Int>(first, default: 0))
            try store.set(2, for: Key<Int>(second, default: 0))
            let (value, twin) = (Default(Key<Int>(first, default: 0), store: store), Default(Key<Int>(second, default: 0), store: store))
            #expect(twin.wrappedValue == 2)
            #expect(value.wrappedValue == 1)
            #expect(twin.wrappedValue == 2)
        }
    }

    /// Inside `write { }`, a read of one spelling got the other spelling's change of the batch.
    @Test(arguments: spellings) func aBatchReadsEachSpellingsOwnChange(first: String, second: String) throws {
        try withTemporaryStore { store, _ throws in
            let (key, twin) = (Key<Int>(first, default: 0), Key<Int>(second, default: 0))
            try store.set(5, for: twin)
            try store.write { batch in
                try batch.set(1, for: key)
                #expect(batch[twin] == 5)
                #expect(batch[key] == 1)
            }
            #expect(store[twin] == 5)
            #expect(store[key] == 1)
        }
    }

    /// An observer of one spelling heard the other's changes: durable, queued and replicated.
    /// Its reads never showed them.
    @Test(arguments: spellings) func anObserverHearsOnlyItsOwnSpelling(first: String, second: String) async throws {
        try await withTemporaryStores(2) { stores in
            let (store, peer) = (stores[0], stores[1])
            let (key, twin) = (Key<Int>(first, default: 0, sync: .automaticSmall), Key<Int>(second, default: 0, sync: .automaticSmall))
            let updates = store.updates(of: key)
            let twinUpdates = store.updates(of: twin)
            try store.set(7, for: twin)  // durable
            store[twin] = 8  // queued, shown before its commit
            try await store.flush()
            try peer.set(9, for: twin)
            _ = try store.importRange(try peer.exportRange(after: 0))  // replicated
            #expect(store[key] == 0)
            try store.set(1, for: key)
            let heard = await collect(updates) { $0.last == 1 }
            #expect(heard == [0, 1], "the observer of \(first.unicodeScalars.map(\.value)) heard the other spelling")
            let twinHeard = await collect(twinUpdates) { $0.last == 9 }
            #expect(twinHeard == [0, 7, 8, 9])
        }
    }
}
