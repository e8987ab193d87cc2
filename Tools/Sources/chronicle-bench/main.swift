import Chronicle
import ChronicleBenchSupport
import ChronicleHTTP
import ChronicleHTTPServer
import ChronicleHub
import Foundation
import GRDB
import Logging
import Synchronization

// chronicle-bench: Chronicle against the physical limit (raw LMDB) and the peers a user would
// pick instead (GRDB/SQLite, UserDefaults), measured in one run on one disk with the same
// durability. `--smoke` runs tiny sizes (CI keeps it from rotting); `--markdown FILE` writes the table.

let arguments = CommandLine.arguments
// The in-process servers log warnings and errors only: an access line per request would bury the table.
LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = .warning
    return handler
}
let smoke = arguments.contains("--smoke")
let markdownPath = arguments.firstIndex(of: "--markdown").flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }
let scale = smoke ? 0.02 : 1.0
func n(_ full: Int) -> Int { max(3, Int(Double(full) * scale)) }

try await runProfileModeIfAsked(arguments)

let scratch = Scratch()
var report = Report()
var durableSetNanoseconds = 0.0
var defaultsSuites: [String] = []

/// A UserDefaults suite of its own, removed when the run ends.
@MainActor func makeDefaults() -> UserDefaults {
    let name = "chronicle-bench-\(UUID().uuidString)"
    defaultsSuites.append(name)
    return UserDefaults(suiteName: name) ?? .standard
}

/// A thread-safe counter.
final class Counter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

if arguments.contains("--only-replication") {
    await replicationBenchmark()
    print("\n" + report.markdown(machine: "\(ProcessInfo.processInfo.activeProcessorCount) cores, replication only"))
    exit(0)
}

if arguments.contains("--only-retention") {
    retentionBenchmark()
    print("\n" + report.markdown(machine: "\(ProcessInfo.processInfo.activeProcessorCount) cores, retention only"))
    exit(0)
}

if arguments.contains("--only-hub-big") {
    await hubBigBenchmark()
    print("\n" + report.markdown(machine: "\(ProcessInfo.processInfo.activeProcessorCount) cores, a big hub only"))
    exit(0)
}

if arguments.contains("--only-hub-appends") {
    await hubAppendsBenchmark()
    print("\n" + report.markdown(machine: "\(ProcessInfo.processInfo.activeProcessorCount) cores, hub appends only"))
    exit(0)
}

if arguments.contains("--only-hub-trim") {
    await hubTrimBenchmark()
    print("\n" + report.markdown(machine: "\(ProcessInfo.processInfo.activeProcessorCount) cores, hub trims only"))
    exit(0)
}

if arguments.contains("--only-hub") {
    await hubBenchmark()
    print("\n" + report.markdown(machine: "\(ProcessInfo.processInfo.activeProcessorCount) cores, hub only"))
    exit(0)
}

// MARK: - Writes from the main thread (a steady trickle)

let onlyLatency = arguments.contains("--only-latency")
do {
    let store = try Store(directory: scratch.directory("latency"))
    let defaults = makeDefaults()
    let count = n(2_000)
    let result = try writeLatencies(store: store, defaults: defaults, count: count, interval: .milliseconds(2))
    let ratio = result.nonThrowing.percentile(0.5) / result.userDefaults.percentile(0.5)
    let tail = result.nonThrowing.percentile(0.99) / result.userDefaults.percentile(0.99)
    report.single("store[key] = v on the calling thread, 1 write / 2 ms", result.nonThrowing.summary,
                  String(format: "UserDefaults.set %@; p50 %.2f×, p99 %.2f× (target ≤ 2×)", result.userDefaults.summary, ratio, tail))
    report.single("… until that change is durable", result.durableAfter.summary,
                  "\(result.durableAfter.nanoseconds.count) of \(count) timed (target ≤ 10 ms)")
    report.single("try store.set (durable) on the calling thread", result.durable.summary,
                  String(format: "p50 %.0f× UserDefaults.set", result.durable.percentile(0.5) / result.userDefaults.percentile(0.5)))
    let suite = "chronicle-bench-\(UUID().uuidString)"
    defaultsSuites.append(suite)
    let threads = concurrentWriteLatencies(store: store, suite: suite, threads: 4, perThread: count / 4, interval: .milliseconds(2))
    report.single("store[key] = v from 4 threads at once, each 1 write / 2 ms", threads.nonThrowing.summary,
                  String(format: "UserDefaults.set from 4 threads %@; p50 %.2f× (target ≤ 1×), p99 %.2f× (target ≤ 2×)",
                         threads.userDefaults.summary, threads.nonThrowing.percentile(0.5) / threads.userDefaults.percentile(0.5),
                         threads.nonThrowing.percentile(0.99) / threads.userDefaults.percentile(0.99)))
    let updates = try updateLatencies(store: store, count: n(500))
    report.single("try store.update { $0 += 1 } (atomic, durable)", updates.update.summary,
                  String(format: "durable set of the same key %@; p50 %.2f× (target ≤ 1.2×)",
                         updates.durableSet.summary, updates.update.percentile(0.5) / updates.durableSet.percentile(0.5)))
} catch {
    print("latency benchmark failed: \(error)")
}

if onlyLatency {
    print("\n" + report.markdown(machine: "\(ProcessInfo.processInfo.activeProcessorCount) cores, partial run"))
    for suite in defaultsSuites { UserDefaults.standard.removePersistentDomain(forName: suite) }
    exit(0)
}

// MARK: - Durable writes

let onlyWrites = arguments.contains("--only-writes")
do {
    let store = try Store(directory: scratch.directory("durable"))
    let raw = RawLMDB(path: scratch.directory("raw-durable").path)
    let count = n(1_000)
    let keys = (0..<64).map { Key<Int>("bench.k\($0)", default: 0, sync: .automaticSmall) }
    // Interleaved rounds (this machine drifts by ±30% between seconds): Chronicle, the raw put
    // and the layout's floor take turns, and each ratio is the median of its rounds'.
    let layout = EventLayoutLMDB(path: scratch.directory("raw-layout").path)
    let names = (0..<64).map { Array("bench.k\($0)".utf8) }
    let rounds = smoke ? 1 : 5
    var ours: [Double] = [], limit: [Double] = [], floor: [Double] = [], pair: [Double] = []
    for round in 0..<rounds {
        let base = round * count
        ours.append(try measure("set", count: count / rounds, warmup: 5) { i in try store.set(base + i, for: keys[i % 64]) }.nanosecondsPerOperation)
        limit.append(measure("raw put", count: count / rounds, warmup: 5) { i in raw.put(key(i % 64), value8) }.nanosecondsPerOperation)
        floor.append(measure("raw event layout", count: count / rounds, warmup: 5) { i in layout.commit([names[i % 64]]) }.nanosecondsPerOperation)
        pair.append(measure("raw event+view", count: count / rounds, warmup: 5) { i in raw.put(key(i % 64), value8, alsoView: true) }.nanosecondsPerOperation)
    }
    durableSetNanoseconds = ours.sorted()[ours.count / 2]
    report.compareRounds("durable set (1 event per commit)", ours, limit, peerName: "raw LMDB put", target: "≤ 1.5×")
    report.compareRounds("raw LMDB doing an event's B-tree work, durable", floor, limit, peerName: "raw LMDB put", target: "info: the layout's floor")
    report.compareRounds("durable set vs the layout's floor", ours, floor, peerName: "raw LMDB, an event's B-tree work", target: "info: the code's cost")
    report.compareRounds("durable set vs raw event+view pair", ours, pair, peerName: "raw LMDB 2 puts", target: "info")

    let batchKeys = (0..<1000).map { Key<Int>("bench.batch\($0)", default: 0, sync: .automaticSmall) }
    let batchNames = (0..<1000).map { Array("bench.batch\($0)".utf8) }
    let batches = n(30)
    let pairs = (0..<1000).map { (key($0), value8) }
    var batchTimes: [Double] = [], rawBatchTimes: [Double] = [], layoutBatchTimes: [Double] = []
    var written = 0
    for _ in 0..<rounds {
        let perRound = max(1, batches / rounds)
        batchTimes.append(try measure("batch", count: perRound) { index in
            try store.write { b in for (i, k) in batchKeys.enumerated() { b[k] = i + written + index } }
        }.nanosecondsPerOperation)
        written += perRound
        rawBatchTimes.append(measure("raw batch", count: perRound) { _ in raw.batch(pairs) }.nanosecondsPerOperation)
        layoutBatchTimes.append(measure("raw layout batch", count: perRound) { _ in layout.commit(batchNames) }.nanosecondsPerOperation)
    }
    let batchNanoseconds = batchTimes.sorted()[batchTimes.count / 2]
    let batch = Measurement(name: "batch", operations: 1, seconds: batchNanoseconds / 1e9)
    report.compareRounds("write { } of 1,000 sets", batchTimes, rawBatchTimes, peerName: "raw LMDB 1,000 puts/txn", target: "≤ 4×")
    report.compareRounds("raw LMDB doing 1,000 events' B-tree work in one txn", layoutBatchTimes, rawBatchTimes, peerName: "raw LMDB 1,000 puts/txn", target: "info: the layout's floor")
    report.compareRounds("write { } of 1,000 sets vs the layout's floor", batchTimes, layoutBatchTimes, peerName: "raw LMDB, 1,000 events' B-tree work", target: "info: the code's cost")
    // A member's batch: every event authenticated (its active key id read, a keyed hash).
    let memberKey = scratch.directory("batch-member-key").appendingPathComponent("group.key")
    try writeKeyFile(memberKey)
    let memberStore = try Store(directory: scratch.directory("batch-member"), configuration: .init(keySource: .keyFile(memberKey)))
    let memberBatch = try measure("member batch", count: batches) { round in
        try memberStore.write { b in for (i, k) in batchKeys.enumerated() { b[k] = i + round } }
    }
    report.compare("write { } of 1,000 sets by a member", memberBatch, batch, peerName: "plain store", target: "info")
    // The same batch once its keys have ten times the revisions: what a commit touches must not
    // grow with the history it extends.
    let deepRounds = 10 * batches
    for round in batches..<deepRounds { try store.write { b in for (i, k) in batchKeys.enumerated() { b[k] = i + round } } }
    let deepBatch = try measure("deep batch", count: batches) { round in
        try store.write { b in for (i, k) in batchKeys.enumerated() { b[k] = i + deepRounds + round } }
    }
    report.compare(
        "write { } of 1,000 sets, keys with \(deepRounds) revisions", deepBatch, batch, peerName: "keys with \(batches)", target: "≈ 1×")

    // 8 concurrent writers on their own threads: group commit.
    let perWriter = n(150)
    let single = try measure("single", count: perWriter * 2) { i in try store.set(i, for: keys[i % 64]) }
    let clock = ContinuousClock()
    let start = clock.now
    let done = DispatchGroup()
    for writer in 0..<8 {
        done.enter()
        let thread = Thread {
            for i in 0..<perWriter { try? store.set(i, for: keys[(writer * 8 + i) % 64]) }
            done.leave()
        }
        thread.start()
    }
    done.wait()
    let elapsed = clock.now - start
    let eightSeconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    let speedup = (Double(perWriter * 8) / eightSeconds) / single.operationsPerSecond
    report.single("8 concurrent writers (group commit)", rate(Double(perWriter * 8) / eightSeconds),
                  String(format: "%.1f× the single-writer rate of %@ (target ≥ 5×)", speedup, rate(single.operationsPerSecond)))
} catch {
    print("durable writes failed: \(error)")
}

// MARK: - Observers stay off the commit path

do {
    // The same durable set, first with no observer, then with 100 live `updates(of:)` observers
    // of the key being written (each hears every change): the writer must not pay for them.
    let store = try Store(directory: scratch.directory("observed"))
    let observed = Key<Int>("bench.observed", default: 0, sync: .automaticSmall)
    let count = n(600)
    let bare = try measure("set, no observers", count: count, warmup: 5) { i in try store.set(i, for: observed) }
    let heard = Counter()
    let observers = (0..<100).map { _ in
        Task.detached { for await _ in store.updates(of: observed) { heard.add() } }
    }
    let watched = try measure("set, 100 observers", count: count, warmup: 5) { i in try store.set(count + i, for: observed) }
    for observer in observers { observer.cancel() }
    report.compare("durable set with 100 live observers", watched, bare, peerName: "same set, no observers", target: "≈ 1×")
    print("  (observers heard \(heard.value) values)")
} catch {
    print("observer benchmark failed: \(error)")
}

// MARK: - GRDB (SQLite WAL)

if onlyWrites {
    print("\n" + report.markdown(machine: "\(ProcessInfo.processInfo.activeProcessorCount) cores, partial run"))
    for suite in defaultsSuites { UserDefaults.standard.removePersistentDomain(forName: suite) }
    exit(0)
}

for synchronous in ["FULL", "NORMAL"] {
    do {
        var configuration = GRDB.Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = \(synchronous)") }
        let queue = try DatabaseQueue(path: scratch.directory("grdb-\(synchronous)").appendingPathComponent("db.sqlite").path, configuration: configuration)
        try queue.write { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB)")
        }
        let store = try Store(directory: scratch.directory("vs-grdb-\(synchronous)"), configuration: .init(durability: synchronous == "FULL" ? .durable : .noMetaSync))
        let keys = (0..<64).map { Key<Int>("bench.k\($0)", default: 0, sync: .automaticSmall) }
        let count = n(400)
        let ours = try measure("set", count: count, warmup: 5) { i in try store.set(i, for: keys[i % 64]) }
        let theirs = try measure("grdb", count: count, warmup: 5) { i in
            try queue.write { db in
                try db.execute(sql: "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                               arguments: ["bench.k\(i % 64)", Data(value8)])
            }
        }
        let label = synchronous == "FULL" ? "durable set" : "set, noMetaSync"
        report.compare("\(label) vs SQLite WAL synchronous=\(synchronous)", ours, theirs, peerName: "GRDB upsert", target: "info")
        let reads = n(200_000)
        let ourReads = measure("read", count: reads) { i in _ = store[keys[i % 64]] }
        let theirReads = try measure("grdb read", count: n(20_000)) { i in
            _ = try queue.read { db in try Data.fetchOne(db, sql: "SELECT value FROM kv WHERE key = ?", arguments: ["bench.k\(i % 64)"]) }
        }
        if synchronous == "FULL" { report.compare("point read", ourReads, theirReads, peerName: "GRDB SELECT", target: "info") }
    } catch {
        print("GRDB comparison failed: \(error)")
    }
}

// MARK: - Typed reads

do {
    let store = try Store(directory: scratch.directory("reads"))
    let raw = RawLMDB(path: scratch.directory("raw-reads").path)
    let keys = (0..<64).map { Key<Int>("bench.r\($0)", default: 0, sync: .automaticSmall) }
    try store.write { b in for (i, k) in keys.enumerated() { b[k] = i } }
    for i in 0..<64 { raw.put(key(i), value8) }
    let defaults = makeDefaults()
    for i in 0..<64 { defaults.set(i, forKey: "bench.r\(i)") }
    let count = n(1_000_000)
    let subscriptRead = measure("store[key]", count: count) { i in _ = store[keys[i & 63]] }
    let wrapper = Default(keys[0], store: store)
    let wrapperRead = measure("@Default", count: count) { _ in _ = wrapper.wrappedValue }
    let rawRead = measure("mdb_get", count: count) { i in _ = raw.get(key(i & 63)) }
    let defaultsRead = measure("UserDefaults", count: count) { i in _ = defaults.integer(forKey: "bench.r\(i & 63)") }
    report.compare("typed read store[key]", subscriptRead, rawRead, peerName: "raw mdb_get", target: "≤ 3×")
    report.compare("typed read through @Default", wrapperRead, rawRead, peerName: "raw mdb_get", target: "≤ 3×")
    report.compare("typed read store[key]", subscriptRead, defaultsRead, peerName: "UserDefaults.integer", target: "< 1×")
} catch {
    print("reads failed: \(error)")
}

// MARK: - Durable write cost against the number of keys

do {
    var rows: [String] = []
    for keyCount in smoke ? [100, 1_000] : [100, 1_000, 10_000, 100_000] {
        let store = try Store(directory: scratch.directory("keys-\(keyCount)"))
        var offset = 0
        while offset < keyCount {
            let end = min(keyCount, offset + 10_000)
            try store.write { b in for i in offset..<end { b[Key<Int>("bench.many\(i)", default: 0, sync: .automaticSmall)] = i } }
            offset = end
        }
        let ours = try measure("set", count: n(200), warmup: 3) { i in try store.set(i, for: Key<Int>("bench.many\((i * 7919) % keyCount)", default: 0, sync: .automaticSmall)) }
        // The raw put of the same size: its B-tree deepens too.
        let raw = RawLMDB(path: scratch.directory("raw-keys-\(keyCount)").path)
        for start in stride(from: 0, to: keyCount, by: 10_000) {
            raw.batch((start..<min(keyCount, start + 10_000)).map { (Array("bench.many\($0)".utf8), value8) })
        }
        let rawPut = measure("raw put", count: n(200), warmup: 3) { i in raw.put(Array("bench.many\((i * 7919) % keyCount)".utf8), value8) }
        // And the layout's floor of the same size: six B-trees that deepen.
        let layout = EventLayoutLMDB(path: scratch.directory("layout-keys-\(keyCount)").path)
        for start in stride(from: 0, to: keyCount, by: 10_000) {
            layout.commit((start..<min(keyCount, start + 10_000)).map { Array("bench.many\($0)".utf8) })
        }
        let floor = measure("layout", count: n(200), warmup: 3) { i in layout.commit([Array("bench.many\((i * 7919) % keyCount)".utf8)]) }
        var line = "\(keyCount) keys: Chronicle \(format(ours.nanosecondsPerOperation))"
            + String(
                format: " (%.2f× a raw put of %@; %.2f× the layout's floor of %@)", ours.nanosecondsPerOperation / rawPut.nanosecondsPerOperation,
                format(rawPut.nanosecondsPerOperation), ours.nanosecondsPerOperation / floor.nanosecondsPerOperation, format(floor.nanosecondsPerOperation))
        if keyCount <= 10_000 {
            let defaults = makeDefaults()
            for i in 0..<keyCount { defaults.set(i, forKey: "bench.many\(i)") }
            defaults.synchronize()
            let theirs = measure("defaults", count: n(smoke ? 20 : 100)) { i in
                defaults.set(i, forKey: "bench.many\((i * 7919) % keyCount)")
                defaults.synchronize()
            }
            line += ", UserDefaults set+synchronize \(format(theirs.nanosecondsPerOperation))"
        }
        rows.append(line)
    }
    report.single("durable set against store size", rows.joined(separator: "; "), "target: flat from 100 to 100,000 keys, within 1.5× a raw put")
} catch {
    print("scaling failed: \(error)")
}

// MARK: - Sealed against plain

do {
    let keyFile = scratch.directory("keys").appendingPathComponent("bench.key")
    try writeKeyFile(keyFile)
    // Sealing is CPU work inside the commit; fsync time varies more than it costs. So both
    // sides run without fsync, and the difference is reported against a durable set.
    let store = try Store(
        directory: scratch.directory("sealed"),
        configuration: .init(keySource: .keyFile(keyFile), durability: .noSync(flushInterval: .seconds(3600))))
    for size in [64, 1024, 100 * 1024] {
        let payload = Data((0..<size).map { UInt8(truncatingIfNeeded: $0) })
        let plain = Key<Data>("bench.plain.\(size)", default: Data(), sync: .automaticSmall)
        let secret = SecretKey<Data>("bench.secret.\(size)", default: Data())
        let count = n(size > 10_000 ? 500 : 3_000)
        let plainSet = try measure("plain", count: count, warmup: 10) { _ in try store.set(payload, for: plain) }
        let sealedSet = try measure("sealed", count: count, warmup: 10) { _ in try store.set(payload, for: secret) }
        let added = max(0, sealedSet.nanosecondsPerOperation - plainSet.nanosecondsPerOperation)
        report.single(
            "sealing cost, \(size) B", format(added) + "/set",
            String(format: "%.1f%% of a durable set (target < 20%%); unsynced set %@ plain, %@ sealed",
                   100 * added / max(durableSetNanoseconds, 1), format(plainSet.nanosecondsPerOperation), format(sealedSet.nanosecondsPerOperation)))
        let plainGet = try measure("plain get", count: n(20_000)) { _ in _ = try store.value(for: plain) }
        let sealedGet = try measure("sealed get", count: n(20_000)) { _ in _ = try store.value(for: secret) }
        report.compare("sealed get, \(size) B", sealedGet, plainGet, peerName: "plain get (cached)", target: "info")
    }
} catch {
    print("sealing failed: \(error)")
}

// MARK: - A log of a million events: replay, open time, memory

do {
    let events = smoke ? 20_000 : 1_000_000
    let directory = scratch.directory("million")
    do {
        var configuration = Store.Configuration()
        configuration.durability = .noMetaSync
        let store = try Store(directory: directory, configuration: configuration)
        var written = 0
        while written < events {
            let batch = min(10_000, events - written)
            // Kept for ever: a log of `events` records to replay, not what retention leaves of it.
            try store.write { b in
                for i in 0..<batch { b[Key<Int>("bench.m\((written + i) % 5_000)", default: 0, sync: .automaticSmall, retention: .forever)] = written + i }
            }
            written += batch
        }
        let replay = try measure("replay", count: 1) { _ in try store.rebuildViews() }
        report.single("replay of \(events) events (rebuildViews)", rate(Double(events) / replay.seconds),
                      String(format: "%.2f s (target ≥ 1 M events/s)", replay.seconds))
    }
    let before = residentBytes()
    let clock = ContinuousClock()
    let start = clock.now
    let reopened = try Store(directory: directory)
    let openTime = clock.now - start
    _ = reopened[Key<Int>("bench.m1", default: 0, sync: .automaticSmall)]
    let after = residentBytes()
    report.single("open a store of \(events) events", format(Double(openTime.components.attoseconds) / 1e9 + Double(openTime.components.seconds) * 1e9),
                  "target < 20 ms; resident memory +\((after - before) / 1024) KiB after open and a read")
} catch {
    print("million failed: \(error)")
}

retentionBenchmark()

await replicationBenchmark()

await hubBenchmark()

actor PortBox {
    var value: Int?
    func set(_ port: Int) { value = port }
}

for suite in defaultsSuites { UserDefaults.standard.removePersistentDomain(forName: suite) }

let machine = "\(ProcessInfo.processInfo.activeProcessorCount) cores, \(ProcessInfo.processInfo.physicalMemory >> 30) GiB, \(smoke ? "smoke sizes" : "full sizes"), \(ISO8601DateFormatter().string(from: Date()).prefix(10))"
if let markdownPath {
    try report.markdown(machine: machine).write(toFile: markdownPath, atomically: true, encoding: .utf8)
}
print("\n" + report.markdown(machine: machine))
