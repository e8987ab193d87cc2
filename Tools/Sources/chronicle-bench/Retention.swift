import Chronicle
import ChronicleBenchSupport
import ChronicleHTTP
import ChronicleHub
import Foundation
import GRDB
import Synchronization

// Retention: what a store costs after years of writes to one key, and what its automatic
// compaction costs the writers beside it.

/// The size of a store's files (`data.mdb`; for SQLite the database and its WAL).
func fileBytes(_ directory: URL, _ names: [String]) -> Int {
    names.reduce(0) { total, name in
        total + (((try? FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent(name).path)[.size]) as? NSNumber)?.intValue ?? 0)
    }
}

/// `count` writes of one Int key and one tenth as many of a Date key, in batches of 1,000 (the
/// automatic compaction runs beside them), then a last pass; returns the store's file size.
func writeHotKeys(_ store: Store, count: Int) throws {
    let counter = Key<Int>("bench.window.x", default: 0)
    let seen = Key<Date>("bench.last-seen", default: .distantPast)
    var written = 0
    while written < count {
        let batch = min(1_000, count - written)
        try store.write { b in
            for i in 0..<batch {
                b[counter] = written + i
                if (written + i) % 10 == 0 { b[seen] = Date(timeIntervalSince1970: Double(written + i)) }
            }
        }
        written += batch
    }
    _ = try store.applyRetention()
}

/// The same writes as SQLite upserts of two rows (GRDB, WAL, synchronous=NORMAL).
func writeHotRows(_ directory: URL, count: Int) throws {
    var configuration = GRDB.Configuration()
    configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
    let queue = try DatabaseQueue(path: directory.appendingPathComponent("db.sqlite").path, configuration: configuration)
    try queue.write { db in
        try db.execute(sql: "PRAGMA journal_mode = WAL")
        try db.execute(sql: "CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB)")
    }
    var written = 0
    while written < count {
        let batch = min(1_000, count - written)
        try queue.write { db in
            for i in 0..<batch {
                try db.execute(sql: "INSERT INTO kv (key, value) VALUES ('x', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", arguments: [written + i])
                if (written + i) % 10 == 0 {
                    try db.execute(sql: "INSERT INTO kv (key, value) VALUES ('seen', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", arguments: [written + i])
                }
            }
        }
        written += batch
    }
    try queue.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
}

@MainActor func retentionBenchmark() {
    var noMetaSync = Store.Configuration()
    noMetaSync.durability = .noMetaSync  // the size does not depend on the sync mode; the run's time does
    retentionSizes(noMetaSync)
    retentionAgedStore(noMetaSync)
    retentionWriters()
}

/// Store size after 10^5, 10^6 and 10^7 writes of one key (and a tenth as many of a second).
/// `--retention-counts 1000,20000` for other sizes.
@MainActor func retentionSizes(_ noMetaSync: Store.Configuration) {
    let asked = arguments.firstIndex(of: "--retention-counts").flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }
    let counts = asked.map { $0.split(separator: ",").compactMap { Int($0) } } ?? (smoke ? [1_000, 10_000] : [100_000, 1_000_000, 10_000_000])
    do {
        var rows: [String] = []
        for count in counts {
            let directory = scratch.directory("retention-\(count)")
            let clock = ContinuousClock()
            let start = clock.now
            try writeHotKeys(try Store(directory: directory, configuration: noMetaSync), count: count)
            let seconds = nanoseconds(clock.now - start) / 1e9
            let ours = fileBytes(directory, ["data.mdb"])
            let sqlite = scratch.directory("retention-sqlite-\(count)")
            try writeHotRows(sqlite, count: count)
            let theirs = fileBytes(sqlite, ["db.sqlite", "db.sqlite-wal"])
            rows.append(String(format: "%@ writes: %d KiB (SQLite %d KiB; %.0f k writes/s)", count.formatted(), ours / 1024, theirs / 1024, Double(count) / seconds / 1e3))
        }
        // Before retention every write stayed: the same 10^5 writes kept for ever.
        var keepAll = noMetaSync
        keepAll.retention = .forever
        let forever = scratch.directory("retention-forever")
        try writeHotKeys(try Store(directory: forever, configuration: keepAll), count: counts[0])
        report.single(
            "store size after writes of one hot key (default retention)", rows.joined(separator: "; "),
            "kept for ever, the first: \(fileBytes(forever, ["data.mdb"]) / 1024) KiB. Target: flat, a small constant over the live values")
    } catch {
        print("retention sizes failed: \(error)")
    }
}

/// A store that lived (10^6 writes of a hot key) against a fresh one with the same live values:
/// durable sets, reads and opening.
@MainActor func retentionAgedStore(_ noMetaSync: Store.Configuration) {
    do {
        let aged = scratch.directory("retention-aged")
        let fresh = scratch.directory("retention-fresh")
        try writeHotKeys(try Store(directory: aged, configuration: noMetaSync), count: smoke ? 10_000 : 1_000_000)
        try writeHotKeys(try Store(directory: fresh, configuration: noMetaSync), count: 200)
        func profile(_ directory: URL) throws -> (open: Double, set: Double, read: Double) {
            let clock = ContinuousClock()
            let start = clock.now
            let store = try Store(directory: directory)
            let open = nanoseconds(clock.now - start)
            let key = Key<Int>("bench.window.x", default: 0)
            let set = try measure("set", count: n(500), warmup: 5) { i in try store.set(i, for: key) }
            let read = try measure("history", count: n(2_000)) { _ in _ = try store.history(of: key) }
            return (open, set.nanosecondsPerOperation, read.nanosecondsPerOperation)
        }
        var ratios: [(open: Double, set: Double, read: Double)] = []
        for _ in 0..<(smoke ? 1 : 3) {
            let (a, f) = (try profile(aged), try profile(fresh))
            ratios.append((a.open / f.open, a.set / f.set, a.read / f.read))
        }
        report.single(
            "a store after 10^6 writes of one key against a fresh one", String(format: "durable set %.2f×, history(of:) %.2f×, open %.2f×", median(ratios.map(\.set)), median(ratios.map(\.read)), median(ratios.map(\.open))),
            "medians of \(ratios.count) interleaved rounds (target ≈ 1×)")
    } catch {
        print("retention aged store failed: \(error)")
    }
}

/// Writers while the automatic compaction runs: a thread writes a hot key in batches of 100;
/// with retention 2 the compaction runs after every few batches, kept for ever it never runs.
/// Same write load either way; interleaved rounds.
@MainActor func retentionWriters() {
    do {
        func writerLatencies(compacting: Bool, round: Int) throws -> (durable: Latencies, nonThrowing: Latencies) {
            let store = try Store(directory: scratch.directory("retention-writers-\(compacting)-\(round)"))
            let hot = Key<Int>("bench.hot", default: 0, retention: compacting ? .revisions(2) : .forever)
            let stop = Atomic<Bool>(false)
            let done = DispatchSemaphore(value: 0)
            Thread {
                var value = 0
                while !stop.load(ordering: .relaxed) {
                    try? store.write { b in for _ in 0..<100 { value += 1; b[hot] = value } }
                }
                done.signal()
            }.start()
            let probe = Key<Int>("bench.probe", default: 0)
            let clock = ContinuousClock()
            var durable: [Double] = []
            var nonThrowing: [Double] = []
            for i in 0..<n(1_000) {
                let before = clock.now
                try store.set(i, for: probe)
                durable.append(nanoseconds(clock.now - before))
                let queued = clock.now
                store[probe] = -i
                nonThrowing.append(nanoseconds(clock.now - queued))
            }
            stop.store(true, ordering: .relaxed)
            done.wait()
            return (Latencies(nanoseconds: durable), Latencies(nanoseconds: nonThrowing))
        }
        var rounds: [(durable50: Double, durable99: Double, set99: Double)] = []
        var with: (durable: Latencies, nonThrowing: Latencies)?
        for round in 0..<(smoke ? 1 : 3) {
            let without = try writerLatencies(compacting: false, round: round)
            let compacting = try writerLatencies(compacting: true, round: round)
            rounds.append((
                compacting.durable.percentile(0.5) / without.durable.percentile(0.5),
                compacting.durable.percentile(0.99) / without.durable.percentile(0.99),
                compacting.nonThrowing.percentile(0.99) / without.nonThrowing.percentile(0.99)))
            with = compacting
        }
        func spread(_ values: [Double]) -> String { String(format: "%.2f–%.2f", values.min() ?? 0, values.max() ?? 0) }
        report.single(
            "writers while the automatic compaction runs", with.map { "durable set \($0.durable.summary); store[key] = v \($0.nonThrowing.summary)" } ?? "-",
            String(format: "against the same load without compaction: durable p50 %.2f× (%@), p99 %.2f× (%@); store[key] = v p99 %.2f× (%@). Target ≤ 2×",
                   median(rounds.map(\.durable50)), spread(rounds.map(\.durable50)), median(rounds.map(\.durable99)), spread(rounds.map(\.durable99)),
                   median(rounds.map(\.set99)), spread(rounds.map(\.set99))))
    } catch {
        print("retention writers failed: \(error)")
    }
}

/// A simulated year of one busy device at the hub: each day, 1,000 writes of one synced key,
/// then a sync. Returns the tenant's stored events and bytes, and the events pushed in all.
@MainActor func hubYear(admin: HubDatabase, url: URL, days: Int) async throws -> (events: Int64, bytes: Int64, pushed: Int, writes: Int) {
    let tenant = "bench-year-\(UUID().uuidString.prefix(8).lowercased())"
    _ = try await admin.addTenant(tenant, maxEvents: 1_000_000, maxBytes: 1 << 30)
    let token = try await admin.issueToken(tenant: tenant, device: "busy")
    let store = try Store(directory: scratch.directory("hub-year"))
    let key = Key<Int>("bench.year.position", default: 0, sync: .manual)
    let replicator = Replicator(store: store, peers: [.http(url, token: token)])
    var pushed = 0
    for day in 0..<days {
        try store.write { b in for i in 0..<1_000 { b[key] = day * 1_000 + i } }
        pushed += try await replicator.sync().sent
    }
    // The trims started by the last pushes end moments later.
    var summary = try await admin.tenants().first { $0.name == tenant }
    for _ in 0..<100 where (summary?.events ?? 0) > Int64(HubDatabase.defaultRetainedRevisions) + 1 {
        try await Task.sleep(for: .milliseconds(50))
        summary = try await admin.tenants().first { $0.name == tenant }
    }
    return (summary?.events ?? -1, summary?.bytes ?? -1, pushed, days * 1_000)
}
