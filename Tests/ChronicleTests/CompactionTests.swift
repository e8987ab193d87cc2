@testable import Chronicle
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleTesting
import Foundation
import Subprocess
import Synchronization
import SystemPackage
import Testing

/// A range's events restamped as if written `daysAgo` days ago (the first event the
/// oldest), each at a new counter from `counter`: what an old device's history looks like.
func aged(_ range: Data, daysAgo: [Double], counterFrom counter: UInt64 = 1_000) throws -> Data {
    var decoded = try EventRange(decoding: Array(range))
    for index in decoded.events.indices {
        let milliseconds = UnixMilliseconds.now() - UInt64(daysAgo[index] * 86_400_000)
        decoded.events[index].hlc = HLC(rawValue: milliseconds << 16)
        decoded.events[index].counter = counter + UInt64(index)
    }
    return Data(decoded.encoded())
}

struct CompactionTests {
    /// Every replica's value of `key` (the default when it has none).
    private func values(_ stores: [Store], _ key: Key<String>) -> [String] { stores.map { $0[key] } }

    /// A compaction that finds nothing to drop commits nothing: no sync, no new transaction for
    /// other processes' observers to re-read.
    @Test func aCompactionWithNothingToDropCommitsNothing() throws {
        try withTemporaryStore { store, _ in
            for index in 0..<5 { try store.set(index, for: Key<Int>("compaction.k\(index)", default: -1)) }
            let eventLog = try store.eventLog
            let before = eventLog.environment.lastTransactionID
            let report = try store.compact()
            #expect(report.dropped == 0)
            #expect(eventLog.environment.lastTransactionID == before)
        }
    }

    @Test func compactionKeepsAnOldRemoveForAClientThatWasAway() async throws {
        try await withTemporaryStores(3) { stores in
            let (hub, writer, away) = (stores[0], stores[1], stores[2])
            // Sixty days ago the writer set the note; the away device got it, then went offline.
            writer[.note] = "secret plan"
            let set = try aged(try writer.exportRange(after: 0), daysAgo: [60])
            _ = try hub.importRange(set)
            _ = try away.importRange(set)
            // Forty-five days ago the writer removed it; the hub (which never pushes) has the remove.
            try writer.remove(.note)
            var removal = try EventRange(decoding: Array(try writer.exportRange(after: 1)))
            removal.events = Array(removal.events.suffix(1))
            _ = try hub.importRange(try aged(Data(removal.encoded()), daysAgo: [45], counterFrom: 2_000))
            #expect(hub[.note] == "")
            let report = try hub.compact(before: Date())
            #expect(report.dropped == 1)  // the set, which the remove outranks
            #expect(hub[.note] == "")
            // The away device comes back and syncs with the hub: the note is gone there too.
            try await Replicator(store: away, peers: [.store(hub)]).sync()
            #expect(values([hub, away], .note) == ["", ""])
            #expect(try hub.verify().isSound)
        }
    }

    @Test func compactionAfterALateOldSetKeepsTheRemove() async throws {
        try await withTemporaryStores(3) { stores in
            let (replica, peer, late) = (stores[0], stores[1], stores[2])
            replica[.note] = "v"
            try replica.remove(.note)
            let removal = try aged(try replica.exportRange(after: 0), daysAgo: [50, 40])
            try await withTemporaryStores(1) { fresh in
                let old = fresh[0]
                _ = try old.importRange(removal)
                try await Replicator(store: old, peers: [.store(peer)]).sync()  // the peer acknowledged the remove
                // A set older than the remove arrives late, from a device that was away.
                late[.note] = "stale"
                _ = try old.importRange(try aged(try late.exportRange(after: 0), daysAgo: [45], counterFrom: 3_000))
                #expect(old[.note] == "")
                _ = try old.compact(before: Date())
                #expect(old[.note] == "")
                try await Replicator(store: old, peers: [.store(peer)]).sync()
                try await withTemporaryStores(1) { newcomer in
                    try await Replicator(store: newcomer[0], peers: [.store(old)]).sync()
                    #expect(values([old, peer, newcomer[0]], .note) == ["", "", ""])
                }
            }
        }
    }

    @Test func aDeviceOnlyWinnerDoesNotHideTheReplicatedValueFromPeers() async throws {
        try await withTemporaryStores(2) { stores in
            let (a, b) = (stores[0], stores[1])
            a[.note] = "shared"
            let shared = try aged(try a.exportRange(after: 0), daysAgo: [20])
            try await withTemporaryStores(1) { more in
                let store = more[0]
                _ = try store.importRange(shared)
                store[Key<String>("sync.note", default: "", sync: .never)] = "device only"  // same key, never leaves
                _ = try store.compact(before: Date())
                try await Replicator(store: store, peers: [.store(b)]).sync()
                #expect(b[.note] == "shared")  // what b would have had without the compaction
                #expect(store[.note] == "device only")
            }
        }
    }

    @Test func identitiesOfDroppedEventsShrinkToRangesAndStayKnown() async throws {
        try await withTemporaryStores(2) { stores in
            let (a, b) = (stores[0], stores[1])
            // Kept for ever by the writer, so its ranges carry every revision.
            let small = Key<String>(Keys.small.name, default: "", sync: .automaticSmall, retention: .forever)
            for i in 0..<200 { a[small] = "v\(i)" }
            let everything = try a.exportRange(after: 0)
            _ = try b.importRange(everything)
            let before = try b.statistics().dots
            let report = try b.compact(before: .distantFuture)
            #expect(report.dropped == 199)
            #expect(before == 200)
            #expect(try b.statistics().dots <= 2)  // the kept event and one range
            let again = try b.importRange(everything)
            #expect(again.applied == 0 && again.duplicates == 200)
            #expect(b[.small] == "v199")
            // A second compaction folds the ranges again.
            for i in 0..<50 { a[small] = "w\(i)" }
            _ = try b.importRange(try a.exportRange(after: 200))
            _ = try b.compact(before: .distantFuture)
            #expect(try b.statistics().dots <= 2)
            #expect(try b.importRange(try a.exportRange(after: 0)).applied == 0)
            #expect(try b.verify().isSound)
        }
    }

    @Test func compactionCarriesPushCheckpointsOver() async throws {
        try await withTemporaryStores(2) { stores in
            let (a, b) = (stores[0], stores[1])
            let blob = Key<Data>("blob", default: Data(), sync: .automaticSmall)
            for i in 0..<20 { a[blob] = Data(repeating: UInt8(i), count: 64 * 1024) }
            try await Replicator(store: a, peers: [.store(b)]).sync()
            for i in 20..<30 { a[blob] = Data(repeating: UInt8(i), count: 64 * 1024) }  // not yet pushed to b
            let epoch = try a.statistics().epoch
            let report = try a.compact(before: Date.distantFuture)
            #expect(report.dropped == 29 && report.checkpointsCarried == 1)
            #expect(try a.statistics().epoch != epoch)
            #expect(a[blob] == Data(repeating: 29, count: 64 * 1024))
            let sync = try await Replicator(store: a, peers: [.store(b)]).sync()
            #expect(sync.sent == 1)  // only the winner kept after b's checkpoint, not the whole log again
            #expect(b[blob] == Data(repeating: 29, count: 64 * 1024))
            #expect(try a.verify().isSound)
        }
    }

    @Test func reclaimingSpaceShrinksTheFileAndKeepsTheStore() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let replica: ReplicaID
        do {
            let store = try Store(directory: directory)
            for i in 0..<40 { store[Key<Data>("blob", default: Data(), sync: .automaticSmall)] = Data(repeating: UInt8(i), count: 128 * 1024) }
            _ = try store.compact(before: Date.distantFuture)
            replica = try store.replicaID
            #expect(throws: ChronicleError.self) { try Store.reclaimSpace(directory: directory) }  // open here
        }
        let sizes = try Store.reclaimSpace(directory: directory)
        #expect(sizes.after < sizes.before / 4)
        let mode = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("data.mdb").path)[.posixPermissions] as? Int
        #expect(mode == 0o600)  // mdb_env_copy2 alone leaves 0644
        let reopened = try Store(directory: directory)
        #expect(try reopened.replicaID == replica)  // reclaiming is not copying
        #expect(reopened[Key<Data>("blob", default: Data(), sync: .automaticSmall)] == Data(repeating: 39, count: 128 * 1024))
        #expect(try reopened.verify().isSound)
    }

    /// A copy of a store's directory, reclaimed before it was ever opened, is still a copy: it
    /// gets its own replica id when it opens, not the original's.
    @Test func reclaimingACopyBeforeItOpensKeepsItACopy() throws {
        let original = temporaryDirectory()
        let copy = temporaryDirectory()
        defer {
            try? FileManager.default.removeItem(at: original)
            try? FileManager.default.removeItem(at: copy)
        }
        let key = Key<Int>("copied.value", default: 0)
        let replica: ReplicaID
        do {
            let store = try Store(directory: original)
            try store.set(5, for: key)
            replica = try store.replicaID
        }
        try? FileManager.default.removeItem(at: copy)
        try FileManager.default.copyItem(at: original, to: copy)
        _ = try Store.reclaimSpace(directory: copy)
        let copied = try Store(directory: copy)
        #expect(try copied.replicaID != replica)
        #expect(copied[key] == 5)
        #expect(try copied.verify().isSound)
    }

    /// Reclaiming while another process writes would send that process's later writes to
    /// the unlinked old file: it must refuse, and leave every write in place.
    @Test func reclaimRefusesWhileAnotherProcessHasTheStoreOpen() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try Store(directory: directory)  // created, then closed in this process
        let refusal = try await Subprocess.run(
            .path(FilePath(try stressExecutable().path)), arguments: Arguments(["writes", directory.path]),
            input: .none, output: .sequence, error: .discarded
        ) { execution -> ChronicleError? in
            var refusal: ChronicleError?
            for try await _ in execution.standardOutput.strings() {
                do throws(ChronicleError) { _ = try Store.reclaimSpace(directory: directory) } catch { refusal = error }
                try execution.send(signal: .kill)
                break
            }
            return refusal
        }.closureResult
        let error = try #require(refusal)
        #expect(error.description.contains("another process has the store open"))
        let store = try Store(directory: directory)
        #expect(try store.verify().isSound)
    }
}

/// `compact` reports its progress (a long compaction used to run silent for minutes).
struct CompactionProgressTests {
    @Test func compactionReportsRisingProgressToTheEnd() throws {
        try withTemporaryStore { store, _ throws in
            for chunk in 0..<10 {
                try store.write { batch in for i in 0..<1_000 { batch[Key<Int>("p.\(i % 100)", default: 0)] = chunk * 1_000 + i } }
            }
            let seen = Mutex<[(UInt64, UInt64)]>([])
            let report = try store.compact { done, total in seen.withLock { $0.append((done, total)) } }
            #expect(report.dropped == 9_900)
            let calls = seen.withLock { $0 }
            #expect(calls.count >= 3, "\(calls.count) calls")
            #expect(calls.last.map { $0.0 == $0.1 } == true, "ends at the whole")
            #expect(calls.map(\.0) == calls.map(\.0).sorted(), "rising")
            #expect(calls.allSatisfy { $0.0 <= $0.1 && $0.1 == 30_000 }, "\(calls.suffix(3))")
            #expect(store[Key<Int>("p.99", default: 0)] == 9_999)
        }
    }
}
