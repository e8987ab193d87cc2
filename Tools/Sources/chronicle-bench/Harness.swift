import ChronicleBenchSupport
import Synchronization
import Foundation

// Why a small harness of our own rather than ordo-one/benchmark: this tool's product is one
// table of *ratios* between Chronicle and its peers (raw LMDB, GRDB, UserDefaults) measured
// in the same run on the same disk, with durability matched per row. ordo-one/benchmark
// measures each benchmark on its own and compares runs against stored baselines; it has no
// notion of a per-row peer, and its jemalloc-based malloc counters are not what we report.
// The harness is two timing helpers and a table; the statistics stay in docs/BENCHMARKS.md's
// "spread between runs" note, measured by running the whole tool several times.

/// The benchmark's measurements (not Foundation's units of measure).
typealias Measurement = ChronicleBenchSupport.Measurement

@MainActor func measureAsync(_ name: String, operations: Int, _ body: () async throws -> Void) async rethrows -> Measurement {
    let clock = ContinuousClock()
    let start = clock.now
    try await body()
    let elapsed = clock.now - start
    return Measurement(name: name, operations: operations, seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
}

/// A fresh directory under the benchmark's scratch folder (on the same disk as everything else).
/// Every scratch directory of this run, removed when the process exits.
let scratchRoots = Mutex<[URL]>([])

final class Scratch {
    let root: URL
    init() {
        root = URL(fileURLWithPath: ProcessInfo.processInfo.environment["BENCH_DIR"] ?? FileManager.default.temporaryDirectory.path)
            .appendingPathComponent("chronicle-bench-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        Self.removedAtExit
        scratchRoots.withLock { $0.append(root) }
    }

    /// A global's deinit never runs, and the `--profile-*` and `--only-*` modes end in `exit`:
    /// without this, every run left its stores behind (a full run's replay store alone is 1.7 GB).
    private static let removedAtExit: Void = {
        atexit {
            for root in scratchRoots.withLock({ $0 }) { try? FileManager.default.removeItem(at: root) }
        }
    }()
    func directory(_ name: String) -> URL {
        let url = root.appendingPathComponent(name, isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
    deinit { try? FileManager.default.removeItem(at: root) }
}

/// Resident memory of this process, in bytes (Linux `/proc/self/status`).
func residentBytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        let digits = line.split(separator: " ").compactMap { Int($0) }.first ?? 0
        return digits * 1024
    }
    return 0
}

func format(_ nanoseconds: Double) -> String {
    if nanoseconds >= 1e9 { return String(format: "%.2f s", nanoseconds / 1e9) }
    if nanoseconds >= 1e6 { return String(format: "%.2f ms", nanoseconds / 1e6) }
    if nanoseconds >= 1e3 { return String(format: "%.2f µs", nanoseconds / 1e3) }
    return String(format: "%.0f ns", nanoseconds)
}

func rate(_ perSecond: Double) -> String {
    if perSecond >= 1e6 { return String(format: "%.2f M/s", perSecond / 1e6) }
    if perSecond >= 1e3 { return String(format: "%.1f K/s", perSecond / 1e3) }
    return String(format: "%.0f /s", perSecond)
}

/// Rows of the report table.
struct Report {
    var rows: [(String, String, String, String)] = []  // what, Chronicle, peer, ratio

    mutating func compare(_ what: String, _ ours: Measurement, _ peer: Measurement, peerName: String, target: String) {
        let ratio = ours.nanosecondsPerOperation / peer.nanosecondsPerOperation
        rows.append((what, format(ours.nanosecondsPerOperation) + "/op", "\(peerName): " + format(peer.nanosecondsPerOperation) + "/op",
                     String(format: "%.2f× (target %@)", ratio, target)))
        print(String(format: "%-44@ %12@  vs %-34@ %6.2f×", what, format(ours.nanosecondsPerOperation), "\(peerName) \(format(peer.nanosecondsPerOperation))", ratio))
    }

    /// Interleaved rounds (ns per operation, ours and the peer's in the same round): the medians,
    /// and the median of the rounds' ratios with their spread.
    mutating func compareRounds(_ what: String, _ ours: [Double], _ peer: [Double], peerName: String, target: String) {
        let ratios = zip(ours, peer).map { $0 / $1 }.sorted()
        let ratio = median(ratios)
        let spread = ratios.count > 1 ? String(format: "; %d rounds %.2f–%.2f×", ratios.count, ratios[0], ratios[ratios.count - 1]) : ""
        rows.append((what, format(median(ours)) + "/op", "\(peerName): " + format(median(peer)) + "/op",
                     String(format: "%.2f× (target %@%@)", ratio, target, spread)))
        print(String(format: "%-44@ %12@  vs %-34@ %6.2f×%@", what, format(median(ours)), "\(peerName) \(format(median(peer)))", ratio, spread))
    }

    mutating func single(_ what: String, _ value: String, _ note: String) {
        rows.append((what, value, "", note))
        print(String(format: "%-44@ %@  %@", what, value, note))
    }

    func markdown(machine: String) -> String {
        var text = "Measured \(machine).\n\n| benchmark | Chronicle | peer | ratio / note |\n|---|---|---|---|\n"
        for row in rows { text += "| \(row.0) | \(row.1) | \(row.2) | \(row.3) |\n" }
        return text
    }
}

/// Writes a random 32-byte group key file, readable by its owner only (Chronicle refuses others).
func writeKeyFile(_ url: URL) throws {
    let created = FileManager.default.createFile(
        atPath: url.path, contents: Data((0..<32).map { _ in UInt8.random(in: 0...255) }), attributes: [.posixPermissions: 0o600])
    guard created else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path]) }
}

/// CPU time this process has used so far, every thread, user and system (`getrusage`).
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}
