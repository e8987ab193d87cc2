@testable import Chronicle
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
}
