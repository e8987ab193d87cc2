@testable import Chronicle
@testable import ChronicleLog
import Dispatch
import ChronicleTesting
import Foundation
import ChronicleLMDB
import Synchronization
import Testing

struct MapGrowthTests {
    @Test func storeGrowsPastItsInitialMap() async throws {
        var configuration = Store.Configuration()
        configuration.initialMapSize = 256 * 1024
        try await withTemporaryStore(configuration: configuration) { store, _ async throws in
            let payload = Data(repeating: 0xAB, count: 32 * 1024)
            for i in 0..<120 {
                try store.set(payload, for: Key<Data>("blob.\(i)", default: Data()))
            }
            try store.write { batch in
                for i in 0..<40 { batch[Key<Data>("batch.\(i)", default: Data())] = payload }
            }
            #expect(try store.eventLog.environment.mapSize > 4 << 20)
            #expect(store[Key<Data>("blob.0", default: Data())] == payload)
            #expect(store[Key<Data>("batch.39", default: Data())] == payload)
            #expect(try store.verify().isSound)
        }
    }

    /// `statistics()` used to take the environment's lock again inside its read; with a
    /// writer waiting to grow the map, every thread deadlocked. The lock now stops any
    /// thread that takes it twice (debug builds), so this fails on the first nested take
    /// whatever the timing, and statistics taken while the map grows all complete.
    @Test func statisticsWhileTheMapGrows() async throws {
        var configuration = Store.Configuration()
        configuration.initialMapSize = 256 * 1024
        try await withTemporaryStore(configuration: configuration) { store, _ async throws in
            let payload = Data(repeating: 0xCD, count: 64 * 1024)
            let writer = Task.detached {
                for i in 0..<200 { try store.set(payload, for: Key<Data>("grow.\(i)", default: Data())) }
            }
            let reader = Task.detached { () throws -> Int in
                var taken = 0
                while taken < 200 {
                    _ = try store.statistics()
                    _ = try store.catalog()
                    taken += 1
                }
                return taken
            }
            try await writer.value
            #expect(try await reader.value == 200)
            #expect(try store.statistics().mapSize > 8 << 20)
        }
    }

    @Test func aNestedTransactionOnOneThreadIsCaught() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let environment = try Environment(path: directory.path)
        try environment.read { _ in #expect(environment.isLockHeldByCurrentThread) }
        #expect(!environment.isLockHeldByCurrentThread)
    }
}
