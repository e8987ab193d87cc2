import ChronicleTesting
import Foundation
import Testing
import ToolsTestSupport

struct ToolRetentionTests {
    /// `chronicle purge-history` drops a key's old revisions at once; the log, the catalog and
    /// `verify` agree afterwards.
    @Test func purgeHistoryDropsOldRevisions() async throws {
        try await withTemporaryStore { _, directory async throws in
            for value in ["one", "two", "three", "four"] {
                let set = try await runChronicle(["set", "editor.draft", value, "--store", directory.path])
                #expect(set.status == 0, "\(set.stderr)")
            }
            let purge = try await runChronicle(["purge-history", "editor.draft", "--store", directory.path])
            #expect(purge.status == 0, "\(purge.stderr)")
            #expect(purge.stdout == "dropped 3 revisions of editor.draft\n")
            let log = try await runChronicle(["log", "--store", directory.path])
            #expect(log.stdout.split(separator: "\n").count == 1)
            #expect(log.stdout.contains("\"four\""))
            let verify = try await runChronicle(["verify", "--store", directory.path])
            #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
            let again = try await runChronicle(["purge-history", "editor.draft", "--store", directory.path])
            #expect(again.stdout == "dropped 0 revisions of editor.draft\n")
        }
    }

    /// What `purge-history` dropped stays in the data file's free pages until the file is
    /// rewritten: `--erase` rewrites it at once, and without it the next opening of the store
    /// (here, `chronicle log`) does, when no other process has it open. Measured by scanning
    /// `data.mdb` for the dropped values.
    @Test func purgedValuesLeaveTheDataFile() async throws {
        for eraseNow in [true, false] {
            // No Store of this process holds it: the tool is the only process using the store.
            let directory = temporaryStoreDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            do {
                let values = (1...4).map { "draft-\($0)-" + UUID().uuidString }
                for value in values {
                    let set = try await runChronicle(["set", "editor.draft", value, "--store", directory.path])
                    #expect(set.status == 0, "\(set.stderr)")
                }
                func inFile() throws -> Int {
                    let bytes = try Data(contentsOf: directory.appendingPathComponent("data.mdb"))
                    return values.dropLast().filter { bytes.range(of: Data($0.utf8)) != nil }.count
                }
                let purge = try await runChronicle(["purge-history", "editor.draft", "--store", directory.path] + (eraseNow ? ["--erase"] : []))
                #expect(purge.status == 0, "\(purge.stderr)")
                if eraseNow {
                    #expect(purge.stdout.contains("purged revisions are gone from it"), "\(purge.stdout)")
                } else {
                    #expect(try inFile() == 3, "the dropped values were not in the file to begin with")
                    let log = try await runChronicle(["log", "--store", directory.path])
                    #expect(log.stdout.contains(values[3]))
                }
                #expect(try inFile() == 0, "dropped values are still in data.mdb (erase now: \(eraseNow))")
                let get = try await runChronicle(["get", "editor.draft", "--store", directory.path])
                #expect(get.stdout.contains(values[3]), "\(get.stdout)\(get.stderr)")
            }
        }
    }
}

