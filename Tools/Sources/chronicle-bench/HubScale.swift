import AsyncHTTPClient
import Chronicle
import ChronicleBenchSupport
import ChronicleHTTP
import ChronicleHTTPServer
import ChronicleHub
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

// The hub at scale (`--hub-scale`, or tiny sizes with `--smoke`): one node process holding
// thousands of long-polls (its memory per held poll, its CPU while they wait, the wake-up after a
// push), and a thousand devices of a hundred tenants pushing and pulling through one and two
// nodes against the same load on `chronicle serve` (one store per tenant, as one user would run it).

/// A `chronicle hub serve` process of this build (the `chronicle` beside `chronicle-bench`), so
/// its memory and CPU are its own, not the simulated devices'.
final class NodeProcess {
    let process = Process()
    let url: URL
    let operatorURL: URL

    init(database: String, arguments: [String]) throws {
        let tool = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("chronicle")
        process.executableURL = tool
        process.arguments = ["hub", "serve", "--port", "0", "--metrics-port", "0", "--log-level", "warning"] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment["CHRONICLE_HUB_DATABASE"] = database  // not on the command line: it may hold a password
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        var text = ""
        func port(_ prefix: String) -> URL? {
            text.split(separator: "\n").first { $0.hasPrefix(prefix) }
                .flatMap { $0.split(separator: ":").last.flatMap { Int($0) } }
                .flatMap { URL(string: "http://127.0.0.1:\($0)") }
        }
        while port("hub serving on") == nil || port("hub metrics and health on") == nil {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw ChronicleError.unexpected(type: "benchmark", description: "the hub node (\(tool.path)) did not start") }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard let url = port("hub serving on"), let operatorURL = port("hub metrics and health on") else {
            throw ChronicleError.unexpected(type: "benchmark", description: "the hub node printed no ports")
        }
        self.url = url
        self.operatorURL = operatorURL
    }

    /// Resident memory (`VmRSS`), in bytes.
    var residentBytes: Int {
        let status = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
        return (line?.split(separator: " ").compactMap { Int($0) }.first ?? 0) * 1024
    }

    /// User and system CPU time so far, in seconds (`/proc/PID/stat` fields 14 and 15).
    var cpuSeconds: Double {
        let stat = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8)) ?? ""
        guard let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// SIGTERM (the node answers held long-polls at once), then waits for it to exit.
    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}

/// Long-polls held on one node process: memory per poll, CPU while they wait, wake-up after a push.
@MainActor func hubLongPollScale(databaseURL: String, admin: HubDatabase) async throws {
    let perTenant = smoke ? 20 : 100  // under the node's 128 held polls per tenant
    let tenants = smoke ? 5 : 100
    let polls = perTenant * tenants
    let rounds = smoke ? 2 : 20
    let idleSeconds = smoke ? 1 : 10

    let (pollers, pushers) = try await scaleTokens(admin, tenants: tenants, perTenant: perTenant, pushers: rounds)

    let node = try NodeProcess(
        database: databaseURL,
        arguments: ["--max-connections", "\(polls + 1_000)", "--max-connections-per-address", "0", "--max-wait-seconds", "300"])
    var configuration = HTTPClient.Configuration()
    configuration.connectionPool = .init(idleTimeout: .seconds(600), concurrentHTTP1ConnectionsPerHostSoftLimit: polls + 100)
    configuration.timeout = .init(connect: .seconds(60), read: .seconds(400))
    let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)

    func get(_ url: URL, token: String?) async throws -> (status: UInt, body: String) { try await scaleGet(client, url, token: token) }
    func held() async throws -> Int {
        let metrics = try await get(node.operatorURL.appendingPathComponent("metrics"), token: nil).body
        let line = metrics.split(separator: "\n").first { $0.hasPrefix("chronicle_hub_long_polls_waiting ") }
        return line.flatMap { $0.split(separator: " ").last.flatMap { Double($0) } }.map { Int($0) } ?? 0
    }

    do {
        // Warm: the node's pool has its connections, its code is paged in.
        for tenant in 0..<tenants { _ = try await get(node.url.appendingPathComponent("v1/info"), token: pollers[tenant][0]) }
        let idleResident = node.residentBytes

        // Open the polls a tenant at a time (a real fleet comes online over minutes, not at once).
        let woken = Mutex<[Int: [ContinuousClock.Instant]]>([:])
        let failures = Mutex<[String]>([])
        var tasks: [Task<Void, Never>] = []
        guard let poll = URL(string: node.url.absoluteString + "/v1/range?after=0&wait=300") else { return }
        for tenant in 0..<tenants {
            for token in pollers[tenant] {
                tasks.append(Task {
                    do {
                        let status = try await get(poll, token: token).status
                        let now = ContinuousClock.now
                        if status != 200 { failures.withLock { $0.append("status \(status)") } }
                        woken.withLock { $0[tenant, default: []].append(now) }
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                })
            }
            if tenant % 10 == 9 || tenant == tenants - 1 {
                let target = (tenant + 1) * perTenant
                var waited = 0
                while try await held() < target {
                    waited += 1
                    if waited > 1_200 { throw ChronicleError.unexpected(type: "benchmark", description: "only \(try await held()) of \(target) long-polls held after 2 minutes; \(failures.withLock { $0.prefix(3) })") }
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
        }
        try await Task.sleep(for: .seconds(1))
        let heldResident = node.residentBytes
        let cpuBefore = node.cpuSeconds
        try await Task.sleep(for: .seconds(idleSeconds))
        let idleCPU = (node.cpuSeconds - cpuBefore) / Double(idleSeconds)
        let perPoll = Double(heldResident - idleResident) / Double(polls)
        report.single(
            "hub node: \(polls) long-polls held (\(tenants) tenants)", String(format: "%.1f KiB per poll", perPoll / 1024),
            String(format: "node resident %d → %d MiB; CPU while they wait %.1f%% of a core", idleResident >> 20, heldResident >> 20, idleCPU * 100))

        try await scaleWakeRounds(node, pushers: pushers, woken: woken, perTenant: perTenant, polls: polls)

        let idlePollers = (rounds..<tenants).map { pollers[$0] }
        try await scaleEmptyPolls(node, client: client, pollers: idlePollers)

        node.stop()  // answers the remaining polls at once
        for task in tasks { await task.value }
        let failed = failures.withLock { $0 }
        if !failed.isEmpty { print("hub scale: \(failed.count) polls failed, first: \(failed[0])") }
    } catch {
        node.stop()
        try? await client.shutdown()
        throw error
    }
    try await client.shutdown()
}

/// A thousand devices of a hundred tenants push, then pull, through one and two in-process hub
/// nodes; the same devices against `chronicle serve` servers, one store per tenant.
@MainActor func hubTenantScale(databaseURL: String, admin: HubDatabase, servers: LoopbackServers) async throws {
    let tenants = smoke ? 4 : 100
    let perTenant = smoke ? 5 : 10
    let perDevice = smoke ? 5 : 40
    let nodeURLs = try await servers.start(2) { _, onRunning in
        var node = HubNode(database: try HubDatabase(url: databaseURL))
        node.maxConnectionsPerAddress = 0
        node.maxConnections = 4_096
        try await node.run(host: "127.0.0.1", port: 0, onRunning: onRunning)
    }
    func devices(_ urls: [URL]) async throws -> [BenchDevice] {
        var devices: [BenchDevice] = []
        for tenant in 0..<tenants {
            let name = "fleet-\(UUID().uuidString.prefix(8).lowercased())"
            try await admin.addTenant(name)
            for device in 0..<perTenant {
                let token = try await admin.issueToken(tenant: name, device: "device-\(device)")
                devices.append(BenchDevice(url: urls[devices.count % urls.count], token: token, group: tenant))
            }
        }
        return devices
    }
    let one = try await pushAndPull(devices: try await devices([nodeURLs[0]]), eventsPerDevice: perDevice) { scratch.directory("fleet1-\($0)") }
    let two = try await pushAndPull(devices: try await devices(nodeURLs), eventsPerDevice: perDevice) { scratch.directory("fleet2-\($0)") }
    let relays = try (0..<tenants).map { try Store(directory: scratch.directory("fleet-serve-\($0)")) }
    let serveURLs = try await servers.start(tenants) { index, onRunning in
        var server = ChronicleServer(store: relays[index], token: "bench")
        server.maxConnectionsPerAddress = 0
        try await server.run(host: "127.0.0.1", port: 0, onRunning: onRunning)
    }
    let serveDevices = (0..<tenants * perTenant).map { BenchDevice(url: serveURLs[$0 / perTenant], token: "bench", group: $0 / perTenant) }
    let serve = try await pushAndPull(devices: serveDevices, eventsPerDevice: perDevice) { scratch.directory("fleet-serve-d\($0)") }
    let what = "\(tenants * perTenant) devices of \(tenants) tenants"
    report.single("hub push, \(what), 1 node", rate(one.push), String(format: "chronicle serve (a store per tenant): %@; %.2f×", rate(serve.push), one.push / serve.push))
    report.single("hub push, \(what), 2 nodes", rate(two.push), String(format: "%.2f× chronicle serve; %.2f× 1 node", two.push / serve.push, two.push / one.push))
    report.single("hub pull, \(what), 1 node", rate(one.pull), String(format: "chronicle serve (a store per tenant): %@; %.2f×", rate(serve.pull), one.pull / serve.pull))
    report.single("hub pull, \(what), 2 nodes", rate(two.pull), String(format: "%.2f× chronicle serve; %.2f× 1 node", two.pull / serve.pull, two.pull / one.pull))
}

/// One GET of the scale benchmark, with a bearer token or none.
func scaleGet(_ client: HTTPClient, _ url: URL, token: String?) async throws -> (status: UInt, body: String) {
    var request = HTTPClientRequest(url: url.absoluteString)
    if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
    let response = try await client.execute(request, timeout: .seconds(400))
    let body = try await response.body.collect(upTo: 16 << 20)
    return (response.status.code, String(buffer: body))
}

/// Tokens for the long-poll scale: `perTenant` polling devices in each of `tenants` new tenants,
/// and a pushing device in each of the first `pushers`.
func scaleTokens(_ admin: HubDatabase, tenants: Int, perTenant: Int, pushers count: Int) async throws -> (pollers: [[String]], pushers: [String]) {
    var pollers: [[String]] = []
    var pushers: [String] = []
    for tenant in 0..<tenants {
        let name = "scale-\(UUID().uuidString.prefix(8).lowercased())"
        try await admin.addTenant(name)
        pollers.append(try await withThrowingTaskGroup(of: String.self) { group in
            for device in 0..<perTenant { group.addTask { try await admin.issueToken(tenant: name, device: "poller-\(device)") } }
            var tokens: [String] = []
            for try await token in group { tokens.append(token) }
            return tokens
        })
        if tenant < count { pushers.append(try await admin.issueToken(tenant: name, device: "pusher")) }
    }
    return (pollers, pushers)
}

/// Wakes one tenant at a time: a device pushes one event; every poll of the tenant answers.
@MainActor func scaleWakeRounds(
    _ node: NodeProcess, pushers: [String], woken: borrowing Mutex<[Int: [ContinuousClock.Instant]]>, perTenant: Int, polls: Int
) async throws {
    var latencies: [Double] = []
    var pushes: [Double] = []
    for round in pushers.indices {
        let store = try Store(directory: scratch.directory("scale-pusher-\(round)"))
        try store.set(round, for: Key<Int>("bench.scale.wake", default: -1, sync: .automaticSmall))
        let start = ContinuousClock.now
        _ = try await Replicator(store: store, peers: [.http(node.url, token: pushers[round])]).sync()
        pushes.append(nanoseconds(ContinuousClock.now - start))
        var waited = 0
        while woken.withLock({ $0[round]?.count ?? 0 }) < perTenant {
            waited += 1
            if waited > 6_000 { throw ChronicleError.unexpected(type: "benchmark", description: "round \(round): the polls were not woken within a minute") }
            try await Task.sleep(for: .milliseconds(10))
        }
        latencies += woken.withLock { $0[round] ?? [] }.map { nanoseconds($0 - start) }
        try await Task.sleep(for: .milliseconds(200))
    }
    let wake = Latencies(nanoseconds: latencies)
    report.single(
        "hub node: push → \(perTenant) polls of the tenant answered", wake.summary,
        "from the push's start, with \(polls) polls held; the push itself p50 \(format(Latencies(nanoseconds: pushes).percentile(0.5))); \(pushers.count) rounds")
}

/// What a device costs while nothing changes: a long-poll renewed every `wait` is two empty polls
/// (token, range; after the wait: token, range). Empty polls (`wait=0`) from 200 devices in a
/// loop, beside the polls still held, give the node's rate of them.
@MainActor func scaleEmptyPolls(_ node: NodeProcess, client: HTTPClient, pollers: [[String]]) async throws {
    let loopers = smoke ? 20 : 200
    let seconds = smoke ? 1 : 10
    let emptyPolls = Atomic<Int>(0)
    let cpuAtStart = node.cpuSeconds
    let deadline = ContinuousClock.now + .seconds(seconds)
    guard let empty = URL(string: node.url.absoluteString + "/v1/range?after=0&wait=0") else { return }
    // Tasks of this actor, like the held polls above: each spends its time awaiting the node.
    var loops: [Task<Void, any Error>] = []
    for index in 0..<loopers {
        let token = pollers[index % pollers.count][index / pollers.count]
        loops.append(Task {
            while ContinuousClock.now < deadline {
                guard try await scaleGet(client, empty, token: token).status == 200 else {
                    throw ChronicleError.unexpected(type: "benchmark", description: "an empty poll failed")
                }
                emptyPolls.add(1, ordering: .relaxed)
            }
        })
    }
    for loop in loops { try await loop.value }
    let pollRate = Double(emptyPolls.load(ordering: .relaxed)) / Double(seconds)
    let pollCPU = (node.cpuSeconds - cpuAtStart) / Double(seconds)
    report.single(
        "hub node: empty polls (token + range, nothing new)", rate(pollRate),
        String(format: "%d devices in a loop beside the held polls; node CPU %.0f%% of a core, PostgreSQL and the devices on the same 2 cores", loopers, pollCPU * 100))
}
