import Chronicle
import ChronicleBenchSupport
import Foundation

// The `--profile-…` modes of chronicle-bench: one piece of work alone, then exit, for `strace`,
// `perf` or callgrind (the full run measures everything else).

/// Runs the profile mode `arguments` asks for and exits the process; returns when none is asked for.
func runProfileModeIfAsked(_ arguments: [String]) async throws {
    try profileReplay(arguments)
    try profileReads(arguments)
    try await profileImport(arguments)
    try profileDurable(arguments)
}

/// `--profile-replay N`: only build a log of N events and replay it (for callgrind).
func profileReplay(_ arguments: [String]) throws {
    if let index = arguments.firstIndex(of: "--profile-replay"), arguments.indices.contains(index + 1), let events = Int(arguments[index + 1]) {
        let profileScratch = Scratch()
        let store = try Store(directory: profileScratch.directory("profile"), configuration: .init(durability: .noMetaSync))
        var written = 0
        while written < events {
            let batch = min(10_000, events - written)
            try store.write { b in for i in 0..<batch { b[Key<Int>("bench.p\((written + i) % 5_000)", default: 0, sync: .automaticSmall)] = i } }
            written += batch
        }
        let replay = try measure("replay", count: 1) { _ in try store.rebuildViews() }
        let verify = try measure("verify", count: 1) { _ in _ = try store.verify() }
        print("replay \(events) events: \(String(format: "%.3f", replay.seconds)) s; verify: \(String(format: "%.3f", verify.seconds)) s")
        exit(0)
    }
}

/// `--profile-reads N [non-ascii]`: only N typed reads (for callgrind), and the time per read.
/// With `non-ascii` the names are not all ASCII, which the decoded-value cache does not hold.
func profileReads(_ arguments: [String]) throws {
    if let index = arguments.firstIndex(of: "--profile-reads"), arguments.indices.contains(index + 1), let reads = Int(arguments[index + 1]), reads > 0 {
        let profileScratch = Scratch()
        let store = try Store(directory: profileScratch.directory("reads"))
        let prefix = arguments.contains("non-ascii") ? "b\u{E9}nch.r" : "bench.r"
        let keys = (0..<64).map { Key<Int>("\(prefix)\($0)", default: 0, sync: .automaticSmall) }
        try store.write { b in for (i, k) in keys.enumerated() { b[k] = i } }
        var sum = 0
        let started = ContinuousClock.now
        for i in 0..<reads { sum &+= store[keys[i & 63]] }
        print("sum \(sum); \(format(nanoseconds(ContinuousClock.now - started) / Double(reads))) a read")
        exit(0)
    }
}

/// `--profile-import plain|source|member N [R]`: only N events pulled store → store, into R fresh
/// targets (for a profiler: the source's writes are then a small part of the run).
/// `--profile-import compare N [R]`: R rounds, each a plain then a member import of N events into
/// fresh targets; prints the median of the rounds' ratios (interleaving cancels the machine's drift).
func profileImport(_ arguments: [String]) async throws {
    if let index = arguments.firstIndex(of: "--profile-import"), arguments.indices.contains(index + 2), let events = Int(arguments[index + 2]) {
        let profileScratch = Scratch()
        let repetitions = arguments.indices.contains(index + 3) ? Int(arguments[index + 3]) ?? 1 : 1
        let keyFile = profileScratch.directory("key").appendingPathComponent("group.key")
        try writeKeyFile(keyFile)
        let member = Store.Configuration(keySource: .keyFile(keyFile))
        /// A source of `events` writes, and the configuration of the targets that import from it.
        func source(_ mode: String) throws -> (Store, Store.Configuration) {
            let store = try Store(directory: profileScratch.directory("source-\(mode)"), configuration: mode == "plain" ? .init() : member)
            try store.write { b in for i in 0..<events { b[Key<Int>("bench.p\(i)", default: 0, sync: .automaticSmall)] = i } }
            return (store, mode == "member" ? member : .init())
        }
        var batches = Replicator.Configuration()
        batches.batchEvents = 4096
        var imports = 0
        var cpu: [String: [Double]] = [:]
        /// Wall-clock ns per event; also records the process's CPU time per event (every thread) under `label`.
        func importTime(from source: Store, _ configuration: Store.Configuration, label: String = "") async throws -> Double {
            imports += 1
            let target = try Store(directory: profileScratch.directory("target\(imports)"), configuration: configuration)
            let before = processCPUSeconds()
            let wall = try await measureAsync("import", operations: events) {
                _ = try await Replicator(store: target, peers: [.store(source)], configuration: batches).sync()
            }.nanosecondsPerOperation
            cpu[label, default: []].append((processCPUSeconds() - before) * 1e9 / Double(events))
            return wall
        }
        func summary(_ values: [Double], _ show: (Double) -> String) -> String {
            let sorted = values.sorted()
            return "median \(show(sorted[sorted.count / 2])) (\(show(sorted[0]))–\(show(sorted[sorted.count - 1])))"
        }
        let mode = arguments[index + 1]
        if mode == "compare" {
            let (plainSource, plainConfiguration) = try source("plain")
            let (memberSource, memberConfiguration) = try source("member")
            var plain: [Double] = [], members: [Double] = [], ratios: [Double] = []
            for _ in 0..<repetitions {
                plain.append(try await importTime(from: plainSource, plainConfiguration, label: "plain"))
                members.append(try await importTime(from: memberSource, memberConfiguration, label: "member"))
                ratios.append(members[members.count - 1] / plain[plain.count - 1])
            }
            let (plainCPU, memberCPU) = (cpu["plain"] ?? [], cpu["member"] ?? [])
            let cpuRatios = zip(memberCPU, plainCPU).map { $0 / $1 }
            print("plain \(summary(plain, format))/event; member \(summary(members, format))/event")
            print("CPU time (all threads): plain \(summary(plainCPU, format))/event; member \(summary(memberCPU, format))/event")
            print("member ÷ plain over \(repetitions) interleaved rounds: \(summary(ratios) { String(format: "%.2f×", $0) }); CPU time \(summary(cpuRatios) { String(format: "%.2f×", $0) })")
        } else {
            let (store, configuration) = try source(mode)
            var times: [Double] = []
            for _ in 0..<repetitions { times.append(try await importTime(from: store, configuration)) }
            print("import of \(events) events, \(repetitions) runs: \(summary(times, format))/event")
        }
        exit(0)
    }
}

/// `--profile-durable sets|raw|layout|batch|raw-batch|layout-batch N`: only N durable sets of 64 keys, N raw LMDB puts of the same
/// bytes with the same durability, N raw commits of an event's B-tree work, N `write { }` of 1,000 sets, N raw
/// transactions of 1,000 puts, or N raw transactions of 1,000 events' B-tree work (for `strace -f -c`, `perf` or callgrind: where a durable set
/// spends what the raw put does not).
func profileDurable(_ arguments: [String]) throws {
    if let index = arguments.firstIndex(of: "--profile-durable"), arguments.indices.contains(index + 2), let count = Int(arguments[index + 2]) {
        let profileScratch = Scratch()
        let clock = ContinuousClock()
        let start = clock.now
        if arguments[index + 1] == "layout" || arguments[index + 1] == "layout-batch" {
            // The B-tree work of N durable sets, or of N batches of 1,000 (`EventLayoutLMDB`).
            let layout = EventLayoutLMDB(path: profileScratch.directory("layout").path)
            let names = (0..<(arguments[index + 1] == "layout" ? 64 : 1_000)).map { Array("bench.b\($0)".utf8) }
            for i in 0..<count { layout.commit(arguments[index + 1] == "layout" ? [names[i % 64]] : names) }
        } else if arguments[index + 1] == "raw" {
            let raw = RawLMDB(path: profileScratch.directory("raw").path)
            for i in 0..<count { raw.put(key(i % 64), value8) }
        } else if arguments[index + 1] == "raw-batch" {
            // 1,000 raw puts in one transaction, N times (the peer of `batch`).
            let raw = RawLMDB(path: profileScratch.directory("raw-batch").path)
            let pairs = (0..<1_000).map { (key($0), value8) }
            for _ in 0..<count { raw.batch(pairs) }
        } else if arguments[index + 1] == "batch" {
            // `write { }` of 1,000 sets, N times (its peer: 1,000 raw puts in one transaction).
            let store = try Store(directory: profileScratch.directory("batch"))
            let keys = (0..<1_000).map { Key<Int>("bench.b\($0)", default: 0, sync: .automaticSmall) }
            for i in 0..<count { try store.write { batch in for key in keys { batch[key] = i } } }
        } else {
            let store = try Store(directory: profileScratch.directory("sets"))
            let keys = (0..<64).map { Key<Int>("bench.k\($0)", default: 0, sync: .automaticSmall) }
            for i in 0..<count { try store.set(i, for: keys[i % 64]) }
        }
        print("\(arguments[index + 1]) × \(count): \(format(nanoseconds(clock.now - start) / Double(count))) each")
        exit(0)
    }
}
