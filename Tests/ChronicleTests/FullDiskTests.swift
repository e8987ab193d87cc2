@testable import Chronicle
import ChronicleTesting
import Foundation
import ChronicleLMDB
import Synchronization
import Testing

struct FullDiskTests {
    /// A store on a 3 MiB tmpfs: filling the disk gives a clear error, and the store stays consistent.
    @Test func fullDiskLeavesTheStoreConsistent() async throws {
        let mountPoint = temporaryDirectory()
        try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: mountPoint) }
        let mount = Process()
        mount.executableURL = URL(fileURLWithPath: "/bin/mount")
        mount.arguments = ["-t", "tmpfs", "-o", "size=3m", "tmpfs", mountPoint.path]
        mount.standardError = FileHandle.nullDevice
        guard (try? mount.run()) != nil else { return }
        mount.waitUntilExit()
        guard mount.terminationStatus == 0 else { return }  // not permitted here (not root): nothing to test on
        defer {
            let umount = Process()
            umount.executableURL = URL(fileURLWithPath: "/bin/umount")
            umount.arguments = [mountPoint.path]
            try? umount.run()
            umount.waitUntilExit()
        }
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
                    try await store.set(blob, for: Key<Data>("blob.\(i)", default: Data()))
                    acknowledged.append(i)
                } catch {
                    failure = error
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
