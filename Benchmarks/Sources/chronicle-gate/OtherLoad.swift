import Foundation

/// The CPU time the machine's other processes took while the gate measured: the machine's busy
/// time (`/proc/stat`'s first line: user, nice, system, irq, softirq and steal ticks) less this
/// process's own (`/proc/self/stat`'s utime and stime, which keep the time of threads that ended).
///
/// The gate measures ratios of wall-clock times. When other work keeps the cores busy, the
/// scheduler hands the gate's threads out in slices that fall unevenly on the two sides of a
/// round, and a ratio can move by a third with no change in the code (beside
/// `scripts/with-cpu-hog.sh`, a durable set read 1.67–2.26× against a typical 1.49×). What other
/// processes took says whether that happened; the gate's own threads do not count, so a change
/// that makes the write path busier is judged, not excused.
struct OtherLoad {
    /// The machine's busy ticks and this process's, and when they were read.
    var machineTicks: UInt64
    var ownTicks: UInt64
    var at: ContinuousClock.Instant

    /// The counters now; `nil` where `/proc` does not have them (not Linux): the gate then judges every run.
    static func now() -> OtherLoad? {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = stat.split(separator: "\n").first, line.hasPrefix("cpu ")
        else { return nil }
        let fields = line.split(separator: " ").dropFirst().compactMap { UInt64($0) }
        guard fields.count >= 8 else { return nil }
        // user nice system idle iowait irq softirq steal: all but idle and iowait are busy.
        let machine = fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7]
        guard let own = ownTicks() else { return nil }
        return OtherLoad(machineTicks: machine, ownTicks: own, at: .now)
    }

    /// This process's utime and stime (fields 14 and 15 of `/proc/self/stat`, counted after the
    /// command name, which may hold spaces and ends at the last `)`).
    private static func ownTicks() -> UInt64? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        // After the name: state is field 3, so utime (14) and stime (15) are at offsets 11 and 12.
        guard fields.count > 12, let user = UInt64(fields[11]), let system = UInt64(fields[12]) else { return nil }
        return user + system
    }

    /// The share of the machine's CPU capacity (every core, the whole time since `earlier`) that
    /// other processes used: about 0 on a quiet machine, near 1 when every core is kept busy.
    func othersShare(since earlier: OtherLoad) -> Double {
        let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
        let cores = Double(ProcessInfo.processInfo.activeProcessorCount)
        let elapsed = at - earlier.at
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        guard ticksPerSecond > 0, cores > 0, seconds > 0 else { return 0 }
        let machine = Double(machineTicks &- earlier.machineTicks)
        let own = Double(ownTicks &- earlier.ownTicks)
        return max(0, machine - own) / (ticksPerSecond * cores * seconds)
    }
}
