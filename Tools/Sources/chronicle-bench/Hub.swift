import Chronicle
import ChronicleHTTP
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

/// 50 devices push their events at once, then 50 devices pull everything at once, through
/// `urls` (devices spread over them round-robin); returns (pushed events/s, pulled events/s).
@MainActor func pushAndPull(
    urls: [URL], tokens: [String], eventsPerDevice: Int, directory: (String) -> URL
) async throws -> (push: Double, pull: Double) {
    let devices = tokens.count
    let writers = try (0..<devices).map { index -> Store in
        let store = try Store(directory: directory("writer-\(index)"))
        try store.write { batch in
            for i in 0..<eventsPerDevice { batch[Key<Int>("bench.hub.d\(index).k\(i)", default: 0, sync: .automaticSmall)] = i }
        }
        return store
    }
    let clock = ContinuousClock()
    var start = clock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for (index, store) in writers.enumerated() {
            group.addTask {
                _ = try await Replicator(store: store, peers: [.http(urls[index % urls.count], token: tokens[index])]).sync()
            }
        }
        try await group.waitForAll()
    }
    let pushSeconds = nanoseconds(clock.now - start) / 1e9
    let readers = try (0..<devices).map { index in try Store(directory: directory("reader-\(index)")) }
    start = clock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for (index, store) in readers.enumerated() {
            group.addTask {
                var configuration = Replicator.Configuration()
                configuration.batchEvents = 4096
                _ = try await Replicator(store: store, peers: [.http(urls[index % urls.count], token: tokens[index])], configuration: configuration).sync()
            }
        }
        try await group.waitForAll()
    }
    let pullSeconds = nanoseconds(clock.now - start) / 1e9
    let total = Double(devices * eventsPerDevice)
    // Every reader got every other device's events (its own writer shares its token, so its own
    // events come back too: a reader is a new device of the tenant).
    guard try readers.allSatisfy({ try $0.logEntries().count == devices * eventsPerDevice }) else {
        throw ChronicleError.unexpected(type: "benchmark", description: "a reader did not get every event")
    }
    return (total / pushSeconds, total * Double(devices) / pullSeconds)
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
