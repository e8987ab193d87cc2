import Chronicle
import ChronicleTesting
import Foundation
import Testing
import ToolsTestSupport

/// `chronicle log` pages through the log: every event once, in order, whatever the page
/// boundaries; `--since`/`--until` by sequence bound the pages; `--key` reads the history index.
struct ToolLogTests {
    /// 2,345 events: more than two pages of the tool's reads (keys kept for ever, so every
    /// revision stays whoever opens the store).
    static func makeStore(_ directory: URL) throws {
        let store = try Store(directory: directory)
        for chunk in 0..<5 {
            try store.write { batch in
                for i in 0..<469 { batch[Key<Int>("k.\((chunk * 469 + i) % 10)", default: 0, retention: .forever)] = chunk * 469 + i }
            }
        }
    }

    static func sequences(_ output: String) throws -> [UInt64] {
        try output.split(separator: "\n").map { line in
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return try #require((object["sequence"] as? NSNumber)?.uint64Value)
        }
    }

    @Test func everyEventOnceInOrderAcrossPages() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try Self.makeStore(directory)
        let all = try await runChronicle(["log", "--json", "--store", directory.path])
        #expect(all.status == 0, "\(all.stderr)")
        #expect(try Self.sequences(all.stdout) == Array(1...2_345))

        let window = try await runChronicle(["log", "--json", "--since", "999", "--until", "2001", "--store", directory.path])
        #expect(try Self.sequences(window.stdout) == Array(999...2_001))
        let fromZero = try await runChronicle(["log", "--json", "--since", "0", "--until", "3", "--store", directory.path])
        #expect(try Self.sequences(fromZero.stdout) == [1, 2, 3])
        let past = try await runChronicle(["log", "--json", "--since", "5000", "--store", directory.path])
        #expect(past.status == 0 && past.stdout.isEmpty)

        // --key through the history index: the same lines a scan of the whole log filters.
        let key = try await runChronicle(["log", "--json", "--key", "k.7", "--store", directory.path])
        let scanned = all.stdout.split(separator: "\n").filter { $0.contains(#""key":"k.7""#) }
        #expect(key.stdout.split(separator: "\n") == scanned)
        #expect(scanned.count == 235 || scanned.count == 234)
        let keyWindow = try await runChronicle(["log", "--json", "--key", "k.7", "--since", "1000", "--until", "1100", "--store", directory.path])
        #expect(try Self.sequences(keyWindow.stdout) == (1000...1100).filter { ($0 - 1) % 10 == 7 })
    }
}
