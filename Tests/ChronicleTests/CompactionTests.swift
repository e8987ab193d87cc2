@testable import Chronicle
import ChronicleTesting
import Foundation
import Testing

struct CompactionTests {
    @Test func compactionWaitsForPeersAndReclaimsSpace() async throws {
        try await withStores(2) { stores in
            let (a, b) = (stores[0], stores[1])
            let blob = Key<Data>("blob", default: Data())
            for i in 0..<20 { a[blob] = Data(repeating: UInt8(i), count: 64 * 1024) }
            try await Replicator(store: a, peers: [.store(b)]).sync()
            for i in 20..<30 { a[blob] = Data(repeating: UInt8(i), count: 64 * 1024) }  // not yet acknowledged by b
            let epoch = try a.statistics().epoch
            let report = try a.compact(before: Date.distantFuture)
            #expect(report.dropped == 20)  // only what b acknowledged
            #expect(try a.statistics().epoch != epoch)
            #expect(a[blob] == Data(repeating: 29, count: 64 * 1024))
            try await Replicator(store: a, peers: [.store(b)]).sync()  // a new epoch: restarts safely
            #expect(b[blob] == Data(repeating: 29, count: 64 * 1024))
            #expect(try b.logEntries().count == 30)
            #expect(try a.verify().isSound)
        }
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let replica: ReplicaID
        do {
            let store = try Store(directory: directory)
            for i in 0..<40 { store[Key<Data>("blob", default: Data())] = Data(repeating: UInt8(i), count: 128 * 1024) }
            _ = try store.compact(before: Date.distantFuture)
            replica = try store.replicaID
            #expect(throws: ChronicleError.self) { try Store.reclaimSpace(directory: directory) }  // open here
        }
        let sizes = try Store.reclaimSpace(directory: directory)
        #expect(sizes.after < sizes.before / 4)
        let reopened = try Store(directory: directory)
        #expect(try reopened.replicaID == replica)  // reclaiming is not copying
        #expect(reopened[Key<Data>("blob", default: Data())] == Data(repeating: 39, count: 128 * 1024))
        #expect(try reopened.verify().isSound)
    }
}
