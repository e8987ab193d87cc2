@testable import Chronicle
import Foundation
import Testing
import ToolsTestSupport

/// `chronicle sync` with another store or a shared folder: the everyday tool, no server.
struct ToolLocalSyncTests {
    func withDirectory(_ body: (URL) async throws -> Void) async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try await body(directory)
    }

    /// Two stores that never see each other meet through a folder: what one pushed, the other pulls.
    @Test func twoStoresSyncThroughASharedFolder() async throws {
        try await withDirectory { directory in
            let laptop = directory.appendingPathComponent("laptop")
            let phone = directory.appendingPathComponent("phone")
            let folder = directory.appendingPathComponent("shared").path
            do {
                let store = try Store(directory: laptop)
                try store.set(.dark, for: Keys.theme)
                try store.set(41, for: Keys.launches)  // sync: .never stays home
            }
            let pushed = try await runChronicle(["sync", "--store", laptop.path, "--folder", folder, "--json"])
            #expect(pushed.status == 0, "\(pushed.stderr)")
            #expect(pushed.stdout.contains("\"sent\":1"), "\(pushed.stdout)")
            let pulled = try await runChronicle(["sync", "--store", phone.path, "--folder", folder])
            #expect(pulled.status == 0, "\(pulled.stderr)")
            #expect(pulled.stdout.contains("applied 1"), "\(pulled.stdout)")
            let store = try Store(directory: phone)
            #expect(store[Keys.theme] == .dark)
            #expect(store[Keys.launches] == 0)
        }
    }

    /// Another store on the same machine, both ways in one run; a second run applies nothing.
    @Test func aStoreSyncsWithAnotherStore() async throws {
        try await withDirectory { directory in
            let one = directory.appendingPathComponent("one")
            let two = directory.appendingPathComponent("two")
            do {
                try Store(directory: one).set(.light, for: Keys.theme)
                try Store(directory: two).set("hello", for: Keys.draft)
            }
            let first = try await runChronicle(["sync", "--store", one.path, "--peer-store", two.path])
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stdout.hasPrefix("sent 1, received 1, applied 1"), "\(first.stdout)")
            let again = try await runChronicle(["sync", "--store", one.path, "--peer-store", two.path])
            #expect(again.status == 0 && again.stdout.hasPrefix("sent 0, "), "\(again.stdout)")
            #expect(again.stdout.contains(" applied 0, "), "\(again.stdout)")
            #expect(try Store(directory: one)[Keys.draft] == "hello")
            #expect(try Store(directory: two)[Keys.theme] == .light)
        }
    }

    /// One peer, and not the store itself: anything else is a usage error (status 64).
    @Test func aSyncNeedsExactlyOnePeerThatIsNotItself() async throws {
        try await withDirectory { directory in
            let store = directory.appendingPathComponent("store").path
            for arguments in [
                ["sync", "--store", store],
                ["sync", "--store", store, "--folder", directory.path, "--peer-store", directory.path],
                ["sync", "--store", store, "--peer-store", store],
            ] {
                let result = try await runChronicle(arguments)
                #expect(result.status == 64, "\(arguments): \(result.stderr)")
            }
        }
    }

    /// A mistyped --peer-store is refused, never created and filled with this store's log.
    @Test func aPeerStoreThatDoesNotExistIsRefused() async throws {
        try await withDirectory { directory in
            let store = directory.appendingPathComponent("store")
            try Store(directory: store).set(.dark, for: Keys.theme)
            let typo = directory.appendingPathComponent("bakcup")
            let result = try await runChronicle(["sync", "--store", store.path, "--peer-store", typo.path])
            #expect(result.status == 2)
            #expect(result.stderr.contains("there is no store at"), "\(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: typo.path))
        }
    }
}
