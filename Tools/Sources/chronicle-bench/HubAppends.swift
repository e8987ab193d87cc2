import AsyncHTTPClient
import Chronicle
import ChronicleHub
import Foundation
import NIOCore
import NIOHTTP1

// `--only-hub-appends`: appends a second from 100 tenants (a device each) through 2 nodes at
// once, each device pushing 20 one-event ranges one after another. Run it on a cluster that
// flushes its commits (`CHRONICLE_PG_DURABLE=1 scripts/with-postgres.sh …`): what it shows is
// whether commits of different tenants wait for each other (a notification taken inside the
// commit holds a cluster-wide lock through the commit's flush).

@MainActor func hubAppendsBenchmark() async {
    guard let hubDatabaseURL else {
        print("hub appends benchmark skipped: set CHRONICLE_BENCH_DATABASE (or run it under scripts/with-postgres.sh)")
        return
    }
    let servers = LoopbackServers()
    defer { servers.stop() }
    do {
        let admin = try HubDatabase(url: hubDatabaseURL)
        let adminTask = Task { await admin.run() }
        defer { adminTask.cancel() }
        try await admin.migrate()
        let (tenants, pushes) = smoke ? (4, 3) : (100, 20)
        let urls = try await servers.start(2) { _, onRunning in
            var node = HubNode(database: try HubDatabase(url: hubDatabaseURL))
            node.maxConnectionsPerAddress = 0
            try await node.run(host: "127.0.0.1", port: 0, onRunning: onRunning)
        }
        var devices: [(url: URL, token: String, bodies: [Data])] = []
        for index in 0..<tenants {
            let name = "appends-\(UUID().uuidString.prefix(8).lowercased())"
            try await admin.addTenant(name)
            let token = try await admin.issueToken(tenant: name, device: "phone")
            let store = try Store(directory: scratch.directory("appends-\(index)"))
            for value in 0..<pushes { try store.set(value, for: Key<Int>("bench.appends.k\(value % 4)", default: 0, sync: .automaticSmall)) }
            let bodies = try (0..<pushes).map { try store.exportRange(after: UInt64($0), maxEvents: 1) }
            devices.append((urls[index % urls.count], token, bodies))
        }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { _ = client.shutdown() }
        let clock = ContinuousClock()
        let start = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for device in devices {
                group.addTask {
                    for body in device.bodies {
                        var request = HTTPClientRequest(url: device.url.appendingPathComponent("v1/range").absoluteString)
                        request.method = .POST
                        request.headers.add(name: "Authorization", value: "Bearer \(device.token)")
                        request.body = .bytes(ByteBuffer(bytes: body))
                        let response = try await client.execute(request, timeout: .seconds(60))
                        _ = try await response.body.collect(upTo: 1 << 20)
                        guard response.status == .ok else { throw BenchFailure("a push got \(response.status)") }
                    }
                }
            }
            try await group.waitForAll()
        }
        let seconds = nanoseconds(clock.now - start) / 1e9
        report.single(
            "hub appends, \(tenants) tenants × \(pushes) one-event pushes, 2 nodes", rate(Double(tenants * pushes) / seconds),
            String(format: "%.2f s in all", seconds))
    } catch {
        print("hub appends benchmark failed: \(error)")
    }
}
