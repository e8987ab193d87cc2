@_spi(Wire) @testable import Chronicle
@testable import ChronicleHub
import ChronicleTesting
import Foundation
import Prometheus
import Subprocess
import SystemPackage
import Testing
import ToolsTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The node's `/metrics` as an operator uses it: Prometheus's own `promtool` accepts it (every
/// family has HELP and TYPE), the figures an alert needs are there (durations by route and
/// status class, bytes, quota refusals by reason, trims, token lookups), and a real Prometheus
/// server scrapes them and answers queries about them. Against a real PostgreSQL.
@Suite(.serialized, .enabled(if: hasTestDatabase, "needs CHRONICLE_TEST_DATABASE: run scripts/test.sh"))
struct HubMetricsTests {
    /// Writes one key per index in one batch: one push of `count` events.
    static func write(_ store: Store, count: Int, prefix: String) throws {
        try store.write { batch in
            for index in 0..<count { batch[Key<Int>("\(prefix).\(index)", default: 0, sync: .manual)] = index }
        }
    }

    /// The node's metrics text, once the trims it runs in the background are done.
    static func metrics(_ hub: HubFixture) async throws -> String {
        await hub.nodes[0].database.trimsFinish()
        return try await rawRequest(hub.operatorURLs[0].appendingPathComponent("metrics"), token: nil).body
    }

    /// The value of the series `series` (name and labels as printed) in a metrics text.
    static func value(of series: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.dropFirst(series.count + 1)) }
    }

    /// The pool's size is the node's setting, and its gauge says which.
    @Test func thePoolSizeGaugeShowsTheNodesSetting() async throws {
        let url = try #require(testDatabase)
        #expect(throws: ChronicleError.self) { try HubDatabase(url: url, poolSize: 0) }
        let database = try HubDatabase(url: url, poolSize: 7)
        let registry = PrometheusCollectorRegistry()
        _ = HubNode(database: database, registry: registry)
        let text = String(decoding: registry.emitToBuffer(), as: UTF8.self)
        #expect(Self.value(of: "chronicle_hub_database_pool_size", in: text) == 7, "\(text)")
    }

    @Test func promtoolAcceptsEveryFamilyAndTheFiguresAreThere() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let full = try await hub.tenant(maxEvents: 1)
            let (token, fullToken) = (try await hub.token(tenant, "phone"), try await hub.token(full, "phone"))
            try await withTemporaryStores(2) { stores in
                // 300 events in one push: a trim follows (every 256 appended).
                try Self.write(stores[0], count: 300, prefix: "metrics.k")
                try await Replicator(store: stores[0], peers: [hub.peer(node: 0, token: token)]).sync()
                try Self.write(stores[1], count: 2, prefix: "metrics.full")
                _ = try? await Replicator(store: stores[1], peers: [hub.peer(node: 0, token: fullToken)]).sync()  // 507
            }
            // Trims run in the background: the push of 300, and each push refused over the quota.
            let text = try await Self.metrics(hub)
            #expect(text.contains(#"chronicle_hub_trims_total{result="done"} "#), "\(text)")
            for family in HubMetric.allCases {
                #expect(text.contains("# HELP \(family.name) "), "no HELP for \(family.name)")
                #expect(text.contains("# TYPE \(family.name) "), "no TYPE for \(family.name)")
            }
            #expect(text.contains("chronicle_hub_events_appended_total 300"), "\(text)")
            #expect(text.contains(#"chronicle_hub_quota_refusals_total{reason="events"} "#), "\(text)")
            #expect(text.contains(#"chronicle_hub_requests_total{route="push",status="2xx"} "#))
            #expect(text.contains("chronicle_hub_database_errors_total 0"), "no request failed: \(text)")
            // 507 Insufficient Storage is of the 5xx class.
            #expect(text.contains(#"chronicle_hub_request_duration_seconds_bucket{route="push",status="5xx",le="+Inf"} "#), "\(text)")
            #expect(text.contains(#"chronicle_hub_token_lookups_total{result="hit"}"#))
            let trims = Self.value(of: #"chronicle_hub_trims_total{result="done"}"#, in: text)
            #expect((trims ?? 0) >= 1 && Self.value(of: "chronicle_hub_trim_duration_seconds_count", in: text) == trims, "\(text)")
            #expect(Self.value(of: "chronicle_hub_trimmed_rows_total", in: text) != nil)
            #expect(!text.contains(tenant) && !text.contains(full), "no series names a tenant")
            #expect((Self.value(of: #"chronicle_hub_database_connections{state="idle"}"#, in: text) ?? 0)
                + (Self.value(of: #"chronicle_hub_database_connections{state="active"}"#, in: text) ?? 0) >= 1, "\(text)")
            #expect(Self.value(of: "chronicle_hub_database_pool_size", in: text) == 40)

            let directory = temporaryDirectory()
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let file = directory.appendingPathComponent("metrics.txt")
            try Data(text.utf8).write(to: file)
            let check = try await Subprocess.run(
                .name("promtool"), arguments: ["check", "metrics"], input: .fileDescriptor(.open(FilePath(file.path), .readOnly), closeAfterSpawningProcess: true),
                output: .string(limit: 1 << 20), error: .string(limit: 1 << 20))
            #expect(check.terminationStatus == .exited(0), "promtool: \(check.standardOutput) \(check.standardError)")
            #expect((check.standardOutput).isEmpty && (check.standardError).isEmpty, "promtool: \(check.standardOutput) \(check.standardError)")
        }
    }

    /// A Prometheus server scrapes the node's operator port every second; after a device's
    /// push, a query for the appended events answers what the push appended.
    @Test func aPrometheusServerScrapesTheNodeAndAnswersQueries() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "phone")
            try await withTemporaryStore { store, _ async throws in
                try Self.write(store, count: 42, prefix: "scraped.k")
                try await Replicator(store: store, peers: [hub.peer(node: 0, token: token)]).sync()
            }
            let directory = temporaryDirectory()
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let target = try #require(hub.operatorURLs[0].port)
            let config = directory.appendingPathComponent("prometheus.yml")
            try Data(
                """
                global:
                  scrape_interval: 1s
                scrape_configs:
                  - job_name: chronicle-hub
                    static_configs:
                      - targets: ['127.0.0.1:\(target)']
                """.utf8
            ).write(to: config)
            let port = try freeLoopbackPort()
            let answer = try await Subprocess.run(
                .name("prometheus"),
                arguments: [
                    "--config.file=\(config.path)", "--storage.tsdb.path=\(directory.appendingPathComponent("data").path)",
                    "--web.listen-address=127.0.0.1:\(port)",
                ],
                input: .none, output: .discarded, error: .discarded
            ) { execution in
                let guardTask = Task { try? await Task.sleep(for: hangGuard); try? execution.send(signal: .kill) }
                defer { guardTask.cancel() }
                var value: String?
                let query = URL(string: "http://127.0.0.1:\(port)/api/v1/query?query=chronicle_hub_events_appended_total")!
                // Until the server is up and has scraped the node (a hang guard, not a measure).
                for _ in 0..<1_200 where value == nil {
                    if let response = try? await rawRequest(query, token: nil), response.status == 200,
                        let json = try? JSONSerialization.jsonObject(with: Data(response.body.utf8)) as? [String: Any],
                        let data = json["data"] as? [String: Any], let result = (data["result"] as? [[String: Any]])?.first,
                        let pair = result["value"] as? [Any], pair.count == 2
                    {
                        value = pair[1] as? String
                    } else {
                        try await Task.sleep(for: .milliseconds(100))
                    }
                }
                try execution.send(signal: .terminate)
                return value
            }
            #expect(answer.closureResult == "42", "Prometheus answered \(String(describing: answer.closureResult))")
        }
    }
}

/// A loopback port nothing listens on now (the kernel's pick, released for the caller).
func freeLoopbackPort() throws -> Int {
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(listener) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) } }
    guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
    return Int(UInt16(bigEndian: address.sin_port))
}
