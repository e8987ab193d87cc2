import Chronicle
import Foundation
import Testing
import ToolsTestSupport

/// `--json` on the commands that print data: one object per line that a script can parse.
struct ToolJSONTests {
    static func object(_ line: Substring) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
    }

    @Test func statsVerifyAndQuarantineSpeakJSON() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        for value in ["dark", "light"] {
            #expect(try await runChronicle(["set", "settings.theme", value, "--store", directory.path]).status == 0)
        }
        let stats = try await runChronicle(["stats", "--json", "--store", directory.path])
        #expect(stats.status == 0, "\(stats.stderr)")
        let lines = stats.stdout.split(separator: "\n")
        #expect(lines.count == 1)
        let object = try Self.object(try #require(lines.first))
        #expect((object["head"] as? NSNumber)?.intValue == 2)
        #expect((object["defaultsKeys"] as? NSNumber)?.intValue == 1)
        #expect((object["replica"] as? String)?.count == 32)

        let verify = try await runChronicle(["verify", "--json", "--store", directory.path])
        #expect(verify.status == 0, "\(verify.stderr)")
        let report = try Self.object(try #require(verify.stdout.split(separator: "\n").first))
        #expect(report["sound"] as? Bool == true)
        #expect((report["records"] as? NSNumber)?.intValue == 2)

        let quarantine = try await runChronicle(["quarantine", "--json", "--store", directory.path])
        #expect(quarantine.status == 0 && quarantine.stdout.isEmpty, "nothing quarantined: no lines")
    }
}
