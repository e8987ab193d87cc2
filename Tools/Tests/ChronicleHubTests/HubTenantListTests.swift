@testable import ChronicleHub
import Foundation
import Testing
import ToolsTestSupport

/// `chronicle hub tenant list` pages (`--limit`, `--after`, `--prefix`), printing each tenant as
/// it is read, and `chronicle hub tenant show` shows one with its devices: on a hub of a million
/// tenants, listing them all before the first line is no way to find one.
extension HubTests {
    @Test func tenantListPagesAndFiltersAndShowShowsOne() async throws {
        let url = try #require(testDatabase)
        try await withHub(nodes: 1) { hub in
            let prefix = "page-\(UUID().uuidString.prefix(8).lowercased())-"
            for name in ["a1", "a2", "b1", "b2", "b3"] { #expect(try await hub.admin.addTenant(prefix + name)) }
            _ = try await hub.admin.issueToken(tenant: prefix + "b1", device: "phone")
            let environment = ["CHRONICLE_HUB_DATABASE": url]
            func names(_ result: ToolResult) -> [String] {
                result.stdout.split(separator: "\n").dropFirst().map { String($0.split(separator: "\t")[0]) }
            }
            let first = try await runChronicle(["hub", "tenant", "list", "--prefix", prefix, "--limit", "2"], environment: environment)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(names(first) == [prefix + "a1", prefix + "a2"])
            #expect(first.stderr.contains("more: --after \(prefix)a2"), "\(first.stderr)")
            let next = try await runChronicle(["hub", "tenant", "list", "--prefix", prefix, "--after", prefix + "a2", "--limit", "2"], environment: environment)
            #expect(names(next) == [prefix + "b1", prefix + "b2"])
            let last = try await runChronicle(["hub", "tenant", "list", "--prefix", prefix, "--after", prefix + "b2", "--limit", "2"], environment: environment)
            #expect(names(last) == [prefix + "b3"])
            #expect(!last.stderr.contains("more:"), "a page that was not full offered another")
            let json = try await runChronicle(["hub", "tenant", "list", "--prefix", prefix + "b", "--json"], environment: environment)
            let objects = try json.stdout.split(separator: "\n").map { line in
                try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            }
            #expect(objects.compactMap { $0["tenant"] as? String } == [prefix + "b1", prefix + "b2", prefix + "b3"])
            #expect((objects.first?["devices"] as? NSNumber)?.intValue == 1)
            let show = try await runChronicle(["hub", "tenant", "show", prefix + "b1", "--json"], environment: environment)
            #expect(show.status == 0, "\(show.stderr)")
            let tenant = try #require(try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
            #expect(tenant["tenant"] as? String == prefix + "b1")
            #expect(tenant["created"] is String)
            let devices = try #require(tenant["devices"] as? [[String: Any]])
            #expect(devices.count == 1 && devices[0]["device"] as? String == "phone" && devices[0]["lastSeen"] == nil)
            #expect((devices.first?["pushed"] as? NSNumber)?.intValue == 0)
            let unknown = try await runChronicle(["hub", "tenant", "show", prefix + "zz"], environment: environment)
            #expect(unknown.status == 2 && unknown.stderr.contains("no tenant named"), "\(unknown.stderr)")
        }
    }
}
