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
}
