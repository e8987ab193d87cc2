@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Testing

/// Names the store keeps apart by their bytes that Swift's `String` calls equal (canonical
/// equivalence): an NFC and an NFD spelling of one word, and an ASCII name beside one spelled
/// with U+212A KELVIN SIGN, which decomposes to "K". A peer can send either spelling; reads and
/// observers must keep them apart as the log, replay and compaction do.
struct CanonicallyEqualNameTests {
    /// The last pair has as many UTF-8 bytes in each spelling (U+212B ANGSTROM SIGN is "A\u{30A}").
    static let spellings = zip(["caf\u{E9}", "Key", "\u{212B}x"], ["cafe\u{301}", "\u{212A}ey", "A\u{30A}x"])

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

    /// A key declared with the other spelling as its former name (after a peer wrote it): the
    /// key's own events matched the former-names set, so each commit was taken for a change
    /// under the former name and the observer re-read the key instead of hearing each event:
    /// of two replicated in one range, it heard only the last.
    @Test(arguments: spellings) func anObserverOfAKeyWhoseFormerNameIsItsTwinHearsEveryValue(first: String, second: String) async throws {
        try await withTemporaryStores(2) { stores in
            let (store, peer) = (stores[0], stores[1])
            let key = Key<Int>(first, default: 0, sync: .automaticSmall, formerNames: [second])
            let updates = store.updates(of: key)
            try peer.set(1, for: key)
            try peer.set(2, for: key)
            _ = try store.importRange(try peer.exportRange(after: 0))  // one commit of both
            let heard = await collect(updates) { $0.last == 2 }
            #expect(heard == [0, 1, 2])
        }
    }

    /// Renaming one spelling to the other is the repair after a peer wrote the other: it was
    /// refused as a rename of a key to its own name.
    @Test(arguments: spellings) func oneSpellingRenamesToTheOther(first: String, second: String) throws {
        try withTemporaryStore { store, _ throws in
            try store.set(7, for: Key<Int>(second, default: 0))
            #expect(try store.renameKey(from: second, to: first))
            #expect(store[Key<Int>(first, default: 0)] == 7)
            #expect(!store.hasValue(for: Key<Int>(second, default: 0)))
        }
    }

    /// A carrier re-spells an event's key in transit. A relay (no group key: it verifies nothing)
    /// that took the copy first took the genuine event, under the same identity, for a duplicate
    /// of it and dropped it: members then quarantined the copy and never got the value.
    @Test func aReSpelledCopyDoesNotPassForTheGenuineEvent() async throws {
        let directories = (0..<3).map { _ in temporaryDirectory() }
        defer { for directory in directories { try? FileManager.default.removeItem(at: directory) } }
        let honest = try Store(directory: directories[0], configuration: passphraseConfiguration("the group"))
        let member = try Store(directory: directories[1], configuration: passphraseConfiguration("the group"))
        let relay = try Store(directory: directories[2])
        let key = Key<String>("Kelvin.theme", default: "", sync: .automaticSmall)
        try honest.set("first", for: Key<String>("group.first", default: "", sync: .automaticSmall))
        try await Replicator(store: member, peers: [.store(honest)]).sync()  // the member has the group's keys
        try honest.set("genuine", for: key)
        let genuine = try EventRange(decoding: Array(try honest.exportRange(after: 0)))
        var copy = genuine
        copy.events = genuine.events.filter { $0.key == key.name }.map { event in
            var event = event
            event.key = "\u{212A}elvin.theme"
            return event
        }
        _ = try relay.importRange(Data(copy.encoded()))
        let receipt = try relay.importRange(Data(genuine.encoded()))
        #expect(receipt.duplicates == 0, "the genuine event was taken for a duplicate of its re-spelled copy")
        // Kept to relay, the genuine event travels as any automatic-small event does: in an
        // automatic pull too, not only with sync() (it used to travel with sync() alone).
        let automatic = try relay.exportRange(after: 0, filter: .automaticSmall(maxPayload: 100 * 1024), maxEvents: 4_096)
        _ = try member.importRange(automatic)
        #expect(member[key] == "genuine", "an automatic pull from the relay did not bring the genuine event")
        try await Replicator(store: member, peers: [.store(relay)]).sync()
        #expect(member[key] == "genuine")
        #expect(member[Key<String>("\u{212A}elvin.theme", default: "")] == "", "the re-spelled copy is not the group's")
    }

    /// `Event`'s `==` is written by hand, to compare the key by its bytes: it must compare every field.
    @Test func eventsCompareKeysByTheirBytesAndEveryField() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, _ throws in
            try store.set(1, for: Key<Int>("Key", default: 0, sync: .manual))
            let event = try #require(try EventRange(decoding: Array(try store.exportRange(after: 0))).events.first)
            try #require(event.authenticator != nil)
            let changes: [(String, (inout Event) -> Void)] = [
                ("origin", { $0.origin = ReplicaID.random() }),
                ("counter", { $0.counter += 1 }),
                ("replica", { $0.replica = ReplicaID.random() }),
                ("hlc", { $0.hlc = HLC(rawValue: $0.hlc.rawValue + 1) }),
                ("domain", { $0.domain = .secrets }),
                ("op", { $0.op = .remove }),
                ("policy", { $0.policy = .automaticSmall }),
                ("encoding", { $0.encoding &+= 1 }),
                ("sealed", { $0.sealed.toggle() }),
                ("key", { $0.key = "\u{212A}ey" }),
                ("payload", { $0.payload.append(0) }),
                ("authenticator", { $0.authenticator = nil }),
            ]
            #expect(Mirror(reflecting: event).children.count == changes.count, "a field added to Event must be compared in its ==")
            for (field, change) in changes {
                var other = event
                change(&other)
                #expect(event != other, "events that differ in \(field) compare equal")
            }
            #expect(event == event)
        }
    }

    /// The read cache tells an ASCII name from a canonically equivalent other by its length alone:
    /// that holds while every scalar whose canonical decomposition is all ASCII takes more bytes
    /// than its decomposition (U+037E, U+1FEF and U+212A, in this toolchain's Unicode data too).
    @Test func noScalarDecomposesToASCIIOfItsOwnLength() {
        var decomposingToASCII: [UInt32] = []
        for value in UInt32(0x80)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let decomposed = String(scalar).decomposedStringWithCanonicalMapping
            guard decomposed.utf8.allSatisfy({ $0 < 0x80 }) else { continue }
            decomposingToASCII.append(value)
            #expect(String(scalar).utf8.count > decomposed.utf8.count, "U+\(String(value, radix: 16)) decomposes to ASCII of its own length")
        }
        #expect(decomposingToASCII == [0x37E, 0x1FEF, 0x212A])
    }
}

