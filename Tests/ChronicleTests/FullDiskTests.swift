@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import ChronicleLMDB
import Synchronization
import Testing

struct FullDiskTests {
    /// A store on a 3 MiB tmpfs: filling the disk gives a clear error, and the store stays consistent.
    @Test func fullDiskLeavesTheStoreConsistent() async throws {
        _ = try await withTmpfs(size: "3m") { mountPoint in
        let directory = mountPoint.appendingPathComponent("store")
        var configuration = Store.Configuration()
        configuration.initialMapSize = 256 * 1024
        var acknowledged: [Int] = []
        var failure: ChronicleError?
        do {
            let store = try Store(directory: directory, configuration: configuration)
            let blob = Data(repeating: 0xAB, count: 100 * 1024)
            for i in 0..<100 {
                do {
                    try store.set(blob, for: Key<Data>("blob.\(i)", default: Data()))
                    acknowledged.append(i)
                } catch {
                    failure = error as? ChronicleError
                    break
                }
            }
        }
        #expect(!acknowledged.isEmpty)
        let error = try #require(failure, "the disk never filled")
        #expect(error.description.contains("disk holding the store is full"), "\(error)")
        let store = try Store(directory: directory, configuration: configuration)
        for i in acknowledged {
            #expect(store[Key<Data>("blob.\(i)", default: Data())].count == 100 * 1024)
        }
        #expect(try store.verify().isSound)
        }
    }
}
