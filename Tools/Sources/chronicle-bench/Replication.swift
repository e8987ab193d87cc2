import Chronicle
import ChronicleBenchSupport
import ChronicleHTTP
import ChronicleHTTPServer
import Foundation

// MARK: - Replication throughput, plain and authenticated

/// A key file for the stores of a sync group (no Argon2id in the way of the measurement).
@MainActor func groupKeyFile() throws -> URL {
    let url = scratch.directory("group").appendingPathComponent("group.key")
    if !FileManager.default.fileExists(atPath: url.path) { try writeKeyFile(url) }
    return url
}

/// A source store of `count` small events, served over loopback HTTP too, for pulls by fresh targets.
struct ReplicationSource {
    let store: Store
    let configuration: Store.Configuration
    let url: URL
    let serverTask: Task<Void, any Error>
}

@MainActor func replicationSource(members: Bool, count: Int) async throws -> ReplicationSource {
    let configuration = members ? Store.Configuration(keySource: .keyFile(try groupKeyFile())) : Store.Configuration()
    let source = try Store(directory: scratch.directory("repl-source-\(members ? "member" : "plain")"), configuration: configuration)
    var written = 0
    while written < count {
        let batch = min(10_000, count - written)
        try source.write { b in for i in 0..<batch { b[Key<Int>("bench.sync\(written + i)", default: 0, sync: .automaticSmall)] = i } }
        written += batch
    }
    let server = ChronicleServer(store: source, token: "bench")
    let port = PortBox()
    let serverTask = Task { try await server.run(host: "127.0.0.1", port: 0) { bound in await port.set(bound) } }
    while await port.value == nil { try await Task.sleep(for: .milliseconds(20)) }
    return ReplicationSource(store: source, configuration: configuration, url: URL(string: "http://127.0.0.1:\(await port.value ?? 0)")!, serverTask: serverTask)
}

/// One pull of everything `source` holds into a fresh target: store → store, or over loopback HTTP.
@MainActor func replicationPull(_ source: ReplicationSource, http: Bool, count: Int) async throws -> Measurement {
    var batches = Replicator.Configuration()
    batches.batchEvents = 4096
    let target = try Store(directory: scratch.directory("repl-target-\(UUID().uuidString)"), configuration: source.configuration)
    let peer: Peer = http ? .http(source.url, token: "bench") : .store(source.store)
    return try await measureAsync(http ? "http" : "store", operations: count) {
        _ = try await Replicator(store: target, peers: [peer], configuration: batches).sync()
    }
}

/// The median of `values` and their range, for a row's note.
func medianAndSpread(_ values: [Double], _ show: (Double) -> String) -> (median: Double, text: String) {
    let sorted = values.sorted()
    let median = sorted[sorted.count / 2]
    return (median, "median \(show(median)) of \(sorted.count), \(show(sorted[0]))–\(show(sorted[sorted.count - 1]))")
}

/// Replication throughput, plain and authenticated, and a member's durable set.
@MainActor func replicationBenchmark() async {
do {
    let count = smoke ? 2_000 : 100_000
    // Interleaved rounds (plain, then member, into fresh targets): the machine's drift between
    // rounds hits both sides of each ratio alike; the row gives the median round and the spread.
    let rounds = smoke ? 1 : 5
    let plainSource = try await replicationSource(members: false, count: count)
    let memberSource = try await replicationSource(members: true, count: count)
    defer { plainSource.serverTask.cancel(); memberSource.serverTask.cancel() }
    for http in [false, true] {
        var plain: [Measurement] = [], members: [Measurement] = []
        for _ in 0..<rounds {
            plain.append(try await replicationPull(plainSource, http: http, count: count))
            members.append(try await replicationPull(memberSource, http: http, count: count))
        }
        let plainRate = medianAndSpread(plain.map(\.operationsPerSecond), rate)
        let (memberTimes, plainTimes) = (members.map(\.nanosecondsPerOperation), plain.map(\.nanosecondsPerOperation))
        if http {
            report.single("replication over loopback HTTP", rate(plainRate.median), "\(count) small events, 4,096-event batches, \(plainRate.text) (target ≥ 100 K/s)")
            report.compareRounds("member import over HTTP (authenticated)", memberTimes, plainTimes, peerName: "plain stores", target: "≤ 1.10×")
        } else {
            report.single("replication store → store", rate(plainRate.median), "\(count) small events, 4,096-event durable batches, \(plainRate.text)")
            report.compareRounds("member import store → store (authenticated)", memberTimes, plainTimes, peerName: "plain stores", target: "≤ 1.10×")
        }
    }

    // A durable set that authenticates its event, against the same set unauthenticated.
    let plainStore = try Store(directory: scratch.directory("auth-plain"))
    let memberStore = try Store(directory: scratch.directory("auth-member"), configuration: .init(keySource: .keyFile(try groupKeyFile())))
    let key = Key<Int>("bench.auth", default: 0, sync: .automaticSmall)
    // Interleaved rounds of 100 sets each: fsync times drift more between seconds than the MAC costs.
    var unauthenticated: [Double] = [], authenticated: [Double] = []
    for _ in 0..<(smoke ? 1 : 6) {
        unauthenticated.append(try measure("plain set", count: n(100), warmup: 5) { i in try plainStore.set(i, for: key) }.nanosecondsPerOperation)
        authenticated.append(try measure("member set", count: n(100), warmup: 5) { i in try memberStore.set(i, for: key) }.nanosecondsPerOperation)
    }
    report.compareRounds("durable set by a member (authenticated)", authenticated, unauthenticated, peerName: "plain store", target: "≤ 1.05×")
} catch {
    print("replication failed: \(error)")
}
}
