@testable import Chronicle
@testable import ChronicleFormat
import Dispatch
import ChronicleTesting
import Foundation
import ChronicleLMDB
import Synchronization
import Testing
import ToolsTestSupport

struct ProcessTests {
    @Test func anotherProcessReadsAndWritesTheSameStore() async throws {
        try await withTemporaryStore { store, directory async throws in
            store[.theme] = .dark
            let get = try await runChronicle(["get", "settings.theme", "--store", directory.path])
            #expect(get.status == 0)
            #expect(get.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "\"dark\"")

            let set = try await runChronicle(["set", "settings.theme", "light", "--store", directory.path])
            #expect(set.status == 0, "\(set.stderr)")
            #expect(store[.theme] == .light)  // the other process's commit invalidates the read cache
            let history = try store.history(of: .theme)
            #expect(history.count == 2)
            #expect(history.allSatisfy { $0.origin == history[0].origin })  // one replica id, shared by both processes

            let rm = try await runChronicle(["rm", "settings.theme", "--store", directory.path])
            #expect(rm.status == 0)
            #expect(store[.theme] == .system)
            #expect(try store.verify().isSound)
        }
    }

    @Test func missingValueExitsNonZero() async throws {
        try await withTemporaryStore { _, directory async throws in
            let get = try await runChronicle(["get", "nothing.here", "--store", directory.path])
            #expect(get.status == 1)
            #expect(get.stderr.contains("no value"))
        }
    }
}
