@_spi(Tools) import Chronicle
import ChronicleBenchSupport
import Foundation

// chronicle-gate: the ratios the README promises, measured in one release-built process against
// raw LMDB doing the same work on the same disk, in interleaved rounds (this machine drifts by
// ±30% between seconds; a ratio of one round's two timings does not), each the median of its
// rounds' ratios. Compared with the thresholds in Benchmarks/gate-thresholds.json (1.25× the
// typical value the README reports): a ratio over its threshold is measured again once, and
// fails the gate only when it is over again. A run during which other processes kept the
// machine's cores busy (they took more than `busyShare` of its CPU capacity; the gate's own
// threads do not count) cannot tell a slower write path from a busier machine: a ratio over its
// threshold in two runs that were both busy is reported as not judged and does not fail the gate
// (see OtherLoad). A quiet run over a threshold always counts. A ratio that leans on the disk's
// cost per page is judged only on a disk like the one its threshold was set on (see Disk).
//
//   chronicle-gate [--thresholds FILE] [--rounds N] [--once]
//   chronicle-gate --profile batch|layout-batch|deep-batch|deep-latency|verify N
//     exit 0: every ratio within its threshold; 1: a ratio over it twice; 2: the run failed.
// `--once` prints the ratios and compares nothing (for scripts/bench-ab.sh and the README's figures).
// `--profile` runs only N batches of one side, for callgrind (`--toggle-collect=*profiledBatch*`).

let arguments = CommandLine.arguments
/// Waits until the store's automatic compaction is idle. Cores before `waitForAutomaticCompaction`
/// (built by `scripts/bench-ab.sh` with `-DGATE_OLDER_CORE`) apply retention in this thread
/// instead, so their past-retention ratio also counts a pass over every key and is not comparable.
func settleSweep(_ store: Store) throws {
    #if GATE_OLDER_CORE
    _ = try store.applyRetention()
    #else
    try store.waitForAutomaticCompaction()
    #endif
}

func option(_ name: String) -> String? {
    arguments.firstIndex(of: name).flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }
}
let rounds = option("--rounds").flatMap(Int.init) ?? 15
let thresholdsPath = option("--thresholds") ?? "Benchmarks/gate-thresholds.json"

/// One gated ratio: Chronicle's time and its peer's, per operation, in each round.
struct Ratio {
    var id: String
    var what: String
    /// Compared with a threshold; a ratio that is not is printed for the reader (what the machine is).
    var gated = true
    var ours: [Double] = []
    var peer: [Double] = []
    var ratios: [Double] { zip(ours, peer).map { $0 / $1 }.sorted() }
    var value: Double { median(ratios) }
    var line: String {
        String(format: "%-32@ %6.2f×  (rounds %.2f–%.2f×; %@: %.0f ns vs %.0f ns)", id, value, ratios.first ?? 0, ratios.last ?? 0, what, median(ours), median(peer))
    }
}

/// The share of the machine's CPU capacity other processes may take during a run the gate
/// judges. On the 2-core CI machine they took 0–9% in quiet runs (the kernel's work on the
/// gate's behalf, its fsyncs, counts as another's), 70–77% beside `scripts/with-cpu-hog.sh` (a
/// busy loop a core), CI runs included.
let busyShare = 0.25

/// One measuring run: the gated ratios, and the share of the machine's CPU capacity other
/// processes took meanwhile (`nil` where `/proc` does not say).
struct Run {
    var ratios: [Ratio]
    var othersShare: Double?
    var busy: Bool { (othersShare ?? 0) > busyShare }
    /// What the layout's one-event durable commit cost against a raw put in this run (see ``Disk``).
    var disk: Double? { ratios.first { $0.id == Disk.ratioID }?.value }
    var summary: String {
        othersShare.map { String(format: "other processes took %.0f%% of the machine's CPU meanwhile (%@)", $0 * 100, busy ? "a busy machine" : "a quiet machine") }
            ?? "no /proc: the machine's load is unknown"
    }
}

/// Measures every gated ratio in `rounds` interleaved rounds, and how busy other processes kept the machine.
func measureRun(rounds: Int) throws -> Run {
    let before = OtherLoad.now()
    let ratios = try measureRatios(rounds: rounds)
    let share = before.flatMap { before in OtherLoad.now().map { $0.othersShare(since: before) } }
    return Run(ratios: ratios, othersShare: share)
}

/// Measures every gated ratio in `rounds` interleaved rounds, in stores under a scratch directory.
func measureRatios(rounds: Int) throws -> [Ratio] {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-gate-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: scratch) }
    func directory(_ name: String) throws -> URL {
        let url = scratch.appendingPathComponent(name, isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
    var durable = Ratio(id: "durable-set-vs-raw-put", what: "try store.set ÷ a durable mdb_put")
    var batch = Ratio(id: "batch-vs-layout-floor", what: "write { } of 1,000 sets ÷ raw LMDB doing their B-tree work")
    var read = Ratio(id: "typed-get-vs-mdb-get", what: "store[key] ÷ mdb_get")
    var disk = Ratio(id: Disk.ratioID, what: "raw LMDB committing one event's B-tree work durably ÷ a durable mdb_put; not gated", gated: false)
    var durableCode = Ratio(id: "durable-set-vs-layout-commit", what: "try store.set ÷ that one-event commit; not gated", gated: false)
    var retained = Ratio(id: "past-retention-vs-floor", what: "write { } of 1,000 sets on keys past their retention, and its drops ÷ raw LMDB doing both")
    let store = try Store(directory: try directory("store"))
    let raw = RawLMDB(path: try directory("raw").path)
    let layout = EventLayoutLMDB(path: try directory("layout").path)
    let keys = (0..<64).map { Key<Int>("bench.k\($0)", default: 0, sync: .automaticSmall) }
    let batchKeys = (0..<1_000).map { Key<Int>("bench.batch\($0)", default: 0, sync: .automaticSmall) }
    let batchNames = batchKeys.map { Array($0.name.utf8) }
    try store.write { b in for (i, k) in keys.enumerated() { b[k] = i } }
    for i in 0..<64 { raw.put(key(i), value8) }
    var written = 0
    // Keys past their retention: 1,000 keys kept to 100 revisions (the default), each written 101
    // times first, so every later batch drops one record of each key. A round's time is the
    // batch and its drops (the automatic compaction's pass, waited for; the run fails if any key
    // holds more than 100 revisions at the end), against raw LMDB writing the batch and dropping as much.
    let deepKeys = (0..<1_000).map { Key<Int>("bench.deep\($0)", default: 0, sync: .automaticSmall) }
    let deepStore = try Store(directory: try directory("deep"))
    let deepLayout = RetentionLayoutLMDB(path: try directory("deep-layout").path, names: deepKeys.map { Array($0.name.utf8) }, keep: 100)
    for revision in 0..<101 {
        try deepStore.write { b in for (i, k) in deepKeys.enumerated() { b[k] = revision + i } }
        deepLayout.write()
    }
    try settleSweep(deepStore)
    _ = try deepStore.applyRetention()
    deepLayout.drop()
    var deepWritten = 101
    for round in 0..<rounds {
        let base = round * 1_000
        durable.ours.append(try measure("set", count: 200, warmup: 5) { i in try store.set(base + i, for: keys[i % 64]) }.nanosecondsPerOperation)
        durable.peer.append(measure("raw put", count: 200, warmup: 5) { i in raw.put(key(i % 64), value8) }.nanosecondsPerOperation)
        disk.ours.append(measure("layout commit", count: 200, warmup: 5) { i in layout.commit([batchNames[i % 64]]) }.nanosecondsPerOperation)
        disk.peer.append(durable.peer[durable.peer.count - 1])
        durableCode.ours.append(durable.ours[durable.ours.count - 1])
        durableCode.peer.append(disk.ours[disk.ours.count - 1])
        batch.ours.append(try measure("batch", count: 4) { index in
            try store.write { b in for (i, k) in batchKeys.enumerated() { b[k] = i + written + index } }
        }.nanosecondsPerOperation)
        written += 4
        batch.peer.append(measure("layout batch", count: 4) { _ in layout.commit(batchNames) }.nanosecondsPerOperation)
        read.ours.append(measure("store[key]", count: 200_000) { i in _ = store[keys[i & 63]] }.nanosecondsPerOperation)
        read.peer.append(measure("mdb_get", count: 200_000) { i in _ = raw.get(key(i & 63)) }.nanosecondsPerOperation)
        retained.ours.append(try measure("batch past retention", count: 3) { index in
            try deepStore.write { b in for (i, k) in deepKeys.enumerated() { b[k] = deepWritten + index + i } }
            try settleSweep(deepStore)
        }.nanosecondsPerOperation)
        deepWritten += 3
        retained.peer.append(measure("layout batch and drops", count: 3) { _ in
            deepLayout.write()
            deepLayout.drop()
        }.nanosecondsPerOperation)
    }
    // The sweep kept up (nothing was deferred past the measured time): every key holds its 100
    // newest revisions, no more.
    for key in deepKeys {
        let kept = try deepStore.history(of: key).count
        guard kept == 100 else { throw GateFailure(description: "\(key.name) holds \(kept) revisions, not 100: the sweep did not keep up") }
    }
    return [durable, batch, read, retained, disk, durableCode]
}

/// A run that cannot measure what it promises.
struct GateFailure: Error, CustomStringConvertible {
    var description: String
}

/// The thresholds file: for each ratio id, the typical value the README reports and the threshold.
struct Thresholds: Decodable {
    struct Entry: Decodable {
        var typical: Double
        var threshold: Double
    }
    var measured: String
    var ratios: [String: Entry]
    var disk: Disk
}

/// How much more a durable commit of the store's layout (an event's pages in six databases)
/// costs than a raw put (one page) depends on the disk. Where the thresholds were set it was
/// about 1.26× (not measured there: the README's 541 µs set and 383 µs put, less the ~60 µs a
/// set costs over the layout's commit); on another 2-core machine of the same kind it was 2.30×,
/// and a durable set read 2.2–2.5× a raw put but 1.06× the layout's commit, with the same code.
/// A ratio that leans on that cost (`dependents`) is judged only where it is at most
/// `judgedUpTo`; elsewhere it is printed as not judged, as on a busy machine.
struct Disk: Decodable {
    static let ratioID = "disk-layout-vs-raw-put"
    var judgedUpTo: Double
    var dependents: [String]
}

/// Runs `count` batches of 1,000 sets of one side of a gated ratio, and nothing else measured:
/// callgrind's `--toggle-collect=*profiledBatch*` then counts only their instructions.
func profile(_ side: String, count: Int) throws {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-gate-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: scratch) }
    let keys = (0..<1_000).map { Key<Int>("bench.batch\($0)", default: 0, sync: .automaticSmall) }
    switch side {
    case "batch", "deep-batch":
        let store = try Store(directory: scratch)
        let warmup = side == "deep-batch" ? 101 : 1
        for revision in 0..<warmup { try store.write { b in for (i, k) in keys.enumerated() { b[k] = revision + i } } }
        try settleSweep(store)
        @inline(never) func profiledBatch(_ index: Int) throws {
            try store.write { b in for (i, k) in keys.enumerated() { b[k] = warmup + index + i } }
            try settleSweep(store)
        }
        for index in 0..<count { try profiledBatch(index) }
    case "deep-latency":
        // chronicle-bench's row "keys with 300 revisions": 270 batches of 1,000 keys, then `count`
        // batches timed while the automatic compaction drops what the default retention does not
        // keep, beside them (its write transactions take the write lock too). Prints the median.
        let store = try Store(directory: scratch)
        for round in 0..<270 { try store.write { b in for (i, k) in keys.enumerated() { b[k] = round + i } } }
        var times: [Double] = []
        for round in 0..<count {
            let start = ContinuousClock.now
            try store.write { b in for (i, k) in keys.enumerated() { b[k] = 270 + round + i } }
            let elapsed = ContinuousClock.now - start
            times.append(Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15)
        }
        // And how long the compaction then takes to finish dropping (the price of shorter steps).
        let start = ContinuousClock.now
        try settleSweep(store)
        let settled = ContinuousClock.now - start
        print(String(
            format: "deep batch beside the compaction: median %.2f ms (%.2f–%.2f); the compaction done %.2f s after the last batch",
            median(times), times.min() ?? 0, times.max() ?? 0, Double(settled.components.seconds) + Double(settled.components.attoseconds) / 1e18))
    case "verify":
        // chronicle-bench --profile-replay's store: `count` × 1,000 events over 5,000 keys.
        var options = Store.Configuration()
        options.durability = .noMetaSync
        let store = try Store(directory: scratch, configuration: options)
        for round in 0..<count {
            try store.write { b in for i in 0..<1_000 { b[Key<Int>("bench.p\((round * 1_000 + i) % 5_000)", default: 0, sync: .automaticSmall)] = i } }
        }
        @inline(never) func profiledBatch() throws { _ = try store.verify() }
        try profiledBatch()
    case "layout-batch":
        let layout = EventLayoutLMDB(path: scratch.path)
        let names = keys.map { Array($0.name.utf8) }
        layout.commit(names)
        @inline(never) func profiledBatch() { layout.commit(names) }
        for _ in 0..<count { profiledBatch() }
    default:
        throw GateFailure(description: "--profile takes batch, deep-batch, deep-latency, verify or layout-batch, not \(side)")
    }
}

do {
    if let side = option("--profile") {
        try profile(side, count: Int(arguments.last ?? "") ?? 20)
        exit(0)
    }
    let first = try measureRun(rounds: rounds)
    for ratio in first.ratios { print(ratio.line) }
    print(first.summary)
    if arguments.contains("--once") { exit(0) }
    let thresholds = try JSONDecoder().decode(Thresholds.self, from: Data(contentsOf: URL(fileURLWithPath: thresholdsPath)))
    /// Whether `run` can judge `id`: a ratio that leans on the disk's cost, only on a disk like
    /// the one the thresholds were set on.
    func judges(_ run: Run, _ id: String) -> Bool {
        !thresholds.disk.dependents.contains(id) || (run.disk ?? 0) <= thresholds.disk.judgedUpTo
    }
    func over(_ run: Run) -> [Ratio] {
        run.ratios.filter { ratio in
            ratio.gated && judges(run, ratio.id) && (thresholds.ratios[ratio.id].map { ratio.value > $0.threshold } ?? false)
        }
    }
    for ratio in first.ratios where ratio.gated && !judges(first, ratio.id) {
        print(String(
            format: "NOT JUDGED %@: %.2f× (threshold %.2f×) on a disk where the layout's one-event commit costs %.2f× a raw put (judged up to %.2f×)",
            ratio.id, ratio.value, thresholds.ratios[ratio.id]?.threshold ?? 0, first.disk ?? 0, thresholds.disk.judgedUpTo))
    }
    let missing = first.ratios.filter(\.gated).map(\.id).filter { thresholds.ratios[$0] == nil }
    guard missing.isEmpty else {
        print("chronicle-gate: \(thresholdsPath) has no threshold for \(missing.joined(separator: ", "))")
        exit(2)
    }
    var failed = over(first)
    var last = first
    if !failed.isEmpty {
        print("over a threshold: \(failed.map(\.id).joined(separator: ", ")); measuring again once")
        last = try measureRun(rounds: rounds)
        for ratio in last.ratios { print(ratio.line) }
        print(last.summary)
        // Over twice: a ratio under its threshold the first time passes, whatever the retry read.
        let overFirst = Set(failed.map(\.id))
        failed = over(last).filter { overFirst.contains($0.id) }
    }
    // Excused only when neither run could judge: a quiet run over a threshold counts.
    if !failed.isEmpty && first.busy && last.busy {
        for ratio in failed {
            print(String(format: "NOT JUDGED %@: %.2f× over its threshold %.2f× twice, on a machine other work kept busy", ratio.id, ratio.value, thresholds.ratios[ratio.id]?.threshold ?? 0))
        }
        print(String(
            format: "chronicle-gate: not judged: in both runs other processes took over the %.0f%% of the CPU a judged run allows; run scripts/bench-gate.sh on a quiet machine",
            busyShare * 100))
        exit(0)
    }
    for ratio in failed {
        let entry = thresholds.ratios[ratio.id]
        print(String(
            format: "FAILED %@: %.2f×, over its threshold %.2f× (typical %.2f×, %@) twice; reproduce with scripts/bench-gate.sh, compare commits with scripts/bench-ab.sh",
            ratio.id, ratio.value, entry?.threshold ?? 0, entry?.typical ?? 0, thresholds.measured))
    }
    exit(failed.isEmpty ? 0 : 1)
} catch {
    print("chronicle-gate: \(error)")
    exit(2)
}
