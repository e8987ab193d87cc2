import Chronicle
import ChronicleBenchSupport
import ChronicleHTTP
import ChronicleHTTPServer
import ChronicleHub
import Foundation
import Synchronization

/// Where the hub benchmark finds PostgreSQL: `CHRONICLE_BENCH_DATABASE`, else the test server
/// `scripts/with-postgres.sh` starts (`scripts/with-postgres.sh .build/release/chronicle-bench --only-hub`).
let hubDatabaseURL = ProcessInfo.processInfo.environment["CHRONICLE_BENCH_DATABASE"] ?? ProcessInfo.processInfo.environment["CHRONICLE_TEST_DATABASE"]

/// Servers on free loopback ports for the length of a benchmark.
final class LoopbackServers: Sendable {
    private final class Ports: Sendable {
        let bound = Mutex<[Int: Int]>([:])
    }

    private let tasks = Mutex<[Task<Void, any Error>]>([])

    func start(_ count: Int, _ run: @escaping @Sendable (Int, @escaping @Sendable (Int) async -> Void) async throws -> Void) async throws -> [URL] {
        let ports = Ports()
        for index in 0..<count {
            let task = Task { try await run(index) { bound in ports.bound.withLock { $0[index] = bound } } }
            tasks.withLock { $0.append(task) }
        }
        while ports.bound.withLock({ $0.count }) < count { try await Task.sleep(for: .milliseconds(20)) }
        return (0..<count).compactMap { index in URL(string: "http://127.0.0.1:\(ports.bound.withLock { $0[index] ?? 0 })") }
    }

    func stop() { for task in tasks.withLock({ $0 }) { task.cancel() } }
}

/// A simulated device: where it syncs and with which token, and the group (tenant, or the
/// store of one `chronicle serve`) whose events it sees.
struct BenchDevice: Sendable {
    var url: URL
    var token: String
    var group: Int
}

/// Every device pushes its `eventsPerDevice` events at once, then a new device in its place
/// pulls everything its group holds, all at once; returns (pushed events/s, pulled events/s).
/// The writers are closed before the readers open (a thousand devices are two thousand stores).
@MainActor func pushAndPull(devices: [BenchDevice], eventsPerDevice: Int, directory: (String) -> URL) async throws -> (push: Double, pull: Double) {
    let clock = ContinuousClock()
    var pushSeconds = 0.0
    do {
        let writers = try devices.indices.map { index -> Store in
            let store = try Store(directory: directory("writer-\(index)"))
            try store.write { batch in
                for i in 0..<eventsPerDevice { batch[Key<Int>("bench.hub.d\(index).k\(i)", default: 0, sync: .automaticSmall)] = i }
            }
            return store
        }
        let start = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, store) in writers.enumerated() {
                let device = devices[index]
                group.addTask { _ = try await Replicator(store: store, peers: [.http(device.url, token: device.token)]).sync() }
            }
            try await group.waitForAll()
        }
        pushSeconds = nanoseconds(clock.now - start) / 1e9
    }
    let readers = try devices.indices.map { index in try Store(directory: directory("reader-\(index)")) }
    let start = clock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for (index, store) in readers.enumerated() {
            let device = devices[index]
            group.addTask {
                var configuration = Replicator.Configuration()
                configuration.batchEvents = 4096
                _ = try await Replicator(store: store, peers: [.http(device.url, token: device.token)], configuration: configuration).sync()
            }
        }
        try await group.waitForAll()
    }
    let pullSeconds = nanoseconds(clock.now - start) / 1e9
    // Every reader got every event of its group (its own writer's too: a reader is a new device).
    let groupSizes = Dictionary(grouping: devices, by: \.group).mapValues { $0.count * eventsPerDevice }
    var pulled = 0
    for (index, reader) in readers.enumerated() {
        let count = try reader.logEntries().count
        guard count == groupSizes[devices[index].group] else {
            throw ChronicleError.unexpected(type: "benchmark", description: "reader \(index) got \(count) events of its group's \(groupSizes[devices[index].group] ?? 0)")
        }
        pulled += count
    }
    return (Double(devices.count * eventsPerDevice) / pushSeconds, Double(pulled) / pullSeconds)
}

/// The time from a device's commit to another device's view, in automatic mode through two
/// nodes (the long-poll path): p50/p99 over `count` changes made one at a time.
@MainActor func automaticLatency(urls: [URL], tokens: [String], count: Int, directory: (String) -> URL) async throws -> Latencies {
    let a = try Store(directory: directory("auto-a"))
    let b = try Store(directory: directory("auto-b"))
    var configuration = Replicator.Configuration()
    configuration.pullInterval = .seconds(3600)  // only the long-poll brings changes
    let first = Replicator(store: a, peers: [.http(urls[0], token: tokens[0])], configuration: configuration)
    let second = Replicator(store: b, peers: [.http(urls[1 % urls.count], token: tokens[1])], configuration: configuration)
    await first.start()
    await second.start()
    defer { Task { await first.stop(); await second.stop() } }
    let key = Key<Int>("bench.hub.latency", default: -1, sync: .automaticSmall)
    var updates = b.updates(of: key).makeAsyncIterator()
    _ = await updates.next()
    try await Task.sleep(for: .milliseconds(500))
    let clock = ContinuousClock()
    var latencies: [Double] = []
    for value in 0..<count {
        try a.set(value, for: key)
        let committed = clock.now
        while let seen = await updates.next(), seen != value {}
        latencies.append(nanoseconds(clock.now - committed))
        try await Task.sleep(for: .milliseconds(50))
    }
    return Latencies(nanoseconds: latencies)
}

// MARK: - The hub (PostgreSQL) against one `chronicle serve` store

/// The hub against one `chronicle serve` store, when PostgreSQL is at hand.
@MainActor func hubBenchmark() async {
    if let hubDatabaseURL {
        do {
            let devices = smoke ? 4 : 50
            let perDevice = smoke ? 10 : 40
            let admin = try HubDatabase(url: hubDatabaseURL)
            let adminTask = Task { await admin.run() }
            defer { adminTask.cancel() }
            try await admin.migrate()
            func tenant() async throws -> [String] {
                let name = "bench-\(UUID().uuidString.prefix(8).lowercased())"
                try await admin.addTenant(name)
                var tokens: [String] = []
                for device in 0..<devices { tokens.append(try await admin.issueToken(tenant: name, device: "device-\(device)")) }
                return tokens
            }
            let servers = LoopbackServers()
            defer { servers.stop() }
            // Every simulated device connects from loopback: no per-address limit on either server.
            let nodeURLs = try await servers.start(2) { _, onRunning in
                var node = HubNode(database: try HubDatabase(url: hubDatabaseURL))
                node.maxConnectionsPerAddress = 0
                try await node.run(host: "127.0.0.1", port: 0, onRunning: onRunning)
            }
            func spread(_ urls: [URL], _ tokens: [String]) -> [BenchDevice] {
                tokens.enumerated().map { BenchDevice(url: urls[$0.offset % urls.count], token: $0.element, group: 0) }
            }
            // Interleaved rounds, each on a new tenant and a new `chronicle serve` store: one push
            // of 2,000 events is a fraction of a second, so one round is mostly this machine's
            // noise. Rows give the medians, and the rounds' spread of ratios to serve's.
            let rounds = smoke ? 1 : 5
            var (ones, twos, serves): ([(push: Double, pull: Double)], [(push: Double, pull: Double)], [(push: Double, pull: Double)]) = ([], [], [])
            for round in 0..<rounds {
                ones.append(try await pushAndPull(devices: spread([nodeURLs[0]], try await tenant()), eventsPerDevice: perDevice) { scratch.directory("hub1-r\(round)-\($0)") })
                twos.append(try await pushAndPull(devices: spread(nodeURLs, try await tenant()), eventsPerDevice: perDevice) { scratch.directory("hub2-r\(round)-\($0)") })
                let relay = try Store(directory: scratch.directory("hub-peer-serve-r\(round)"))
                let serveURL = try await servers.start(1) { _, onRunning in
                    var server = ChronicleServer(store: relay, token: "bench")
                    server.maxConnectionsPerAddress = 0
                    try await server.run(host: "127.0.0.1", port: 0, onRunning: onRunning)
                }
                serves.append(try await pushAndPull(devices: spread(serveURL, Array(repeating: "bench", count: devices)), eventsPerDevice: perDevice) { scratch.directory("serve-r\(round)-\($0)") })
            }
            func row(_ what: String, _ ours: [Double], _ serve: [Double], peer: Bool) {
                let ratios = zip(ours, serve).map { $0 / $1 }.sorted()
                let serveText = peer ? "chronicle serve (one store): \(rate(median(serve))); " : ""
                let spread = rounds > 1
                    ? String(format: " (%d rounds %.2f–%.2f×; hub %@–%@)", rounds, ratios[0], ratios[rounds - 1], rate(ours.min() ?? 0), rate(ours.max() ?? 0)) : ""
                report.single(what, rate(median(ours)), serveText + String(format: "%.2f×", median(ratios)) + (peer ? "" : " chronicle serve") + spread)
            }
            row("hub push, \(devices) devices at once, 1 node", ones.map(\.push), serves.map(\.push), peer: true)
            row("hub push, \(devices) devices at once, 2 nodes", twos.map(\.push), serves.map(\.push), peer: false)
            row("hub pull, \(devices) devices at once, 1 node", ones.map(\.pull), serves.map(\.pull), peer: true)
            row("hub pull, \(devices) devices at once, 2 nodes", twos.map(\.pull), serves.map(\.pull), peer: false)
            let year = try await hubYear(admin: admin, url: nodeURLs[0], days: smoke ? 5 : 365)
            report.single(
                "hub: a simulated year of one busy device (\(year.writes.formatted()) writes of one key, a sync a day)",
                "tenant holds \(year.events) events, \(year.bytes / 1024) KiB",
                "pushed \(year.pushed.formatted()) events in all (retention 100 on device and hub); default quota 1,000,000 events")
            let latency = try await automaticLatency(urls: nodeURLs, tokens: try await tenant(), count: smoke ? 5 : 100) { scratch.directory("hub-auto-\($0)") }
            report.single("hub: commit → other device's view, automatic, 2 nodes", latency.summary, "long-poll woken by LISTEN/NOTIFY (target: within a second)")
            // `--hub-scale`: a node process with 10,000 held long-polls, and 1,000 devices of 100
            // tenants (several minutes; the smoke run does it at tiny sizes).
            if smoke || arguments.contains("--hub-scale") {
                try await hubLongPollScale(databaseURL: hubDatabaseURL, admin: admin)
                try await hubTenantScale(databaseURL: hubDatabaseURL, admin: admin, servers: servers)
            }
        } catch {
            print("hub benchmark failed: \(error)")
        }
    } else {
        print("hub benchmark skipped: no PostgreSQL (run under scripts/with-postgres.sh, or set CHRONICLE_BENCH_DATABASE)")
    }
}
