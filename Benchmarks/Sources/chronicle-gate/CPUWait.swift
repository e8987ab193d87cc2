import Foundation

/// How long this process's threads ran on a CPU and how long they waited for one while runnable,
/// summed over its threads (`/proc/self/task/*/schedstat`: the kernel's run time and run-queue
/// wait, in nanoseconds).
///
/// The gate measures ratios of wall-clock times. On a machine whose cores other work keeps busy,
/// the scheduler hands the gate's threads out in slices that fall unevenly on the two sides of a
/// round, and a ratio can move by a third with no change in the code (a CI run beside a CPU hog
/// read 2.02× for a durable set whose typical ratio is 1.49×). The wait share says whether that
/// happened: on a quiet machine the gate's threads (the measuring thread and the compaction's)
/// fit the cores and wait almost never.
struct CPUWait {
    /// Each thread's run time and run-queue wait (nanoseconds), by thread id.
    var threads: [String: (running: UInt64, waiting: UInt64)]

    /// This process's threads now; `nil` where the kernel keeps no schedstat (not Linux, or a
    /// kernel built without it): the gate then judges every run.
    static func now() -> CPUWait? {
        let tasks = "/proc/self/task"
        guard let ids = try? FileManager.default.contentsOfDirectory(atPath: tasks) else { return nil }
        var threads: [String: (running: UInt64, waiting: UInt64)] = [:]
        for id in ids {
            // A thread may end between the listing and the read: it then counts no more.
            guard let text = try? String(contentsOfFile: "\(tasks)/\(id)/schedstat", encoding: .utf8) else { continue }
            let fields = text.split(whereSeparator: \.isWhitespace).compactMap { UInt64($0) }
            guard fields.count >= 2 else { continue }
            threads[id] = (fields[0], fields[1])
        }
        return threads.isEmpty ? nil : CPUWait(threads: threads)
    }

    /// The share of the time since `earlier` that this process's threads, when runnable, spent
    /// waiting for a CPU (0 when they never waited). Counts the threads alive at both reads and
    /// those started in between; a thread that ended in between is not counted.
    func waitShare(since earlier: CPUWait) -> Double {
        var running: UInt64 = 0
        var waiting: UInt64 = 0
        for (id, now) in threads {
            let before = earlier.threads[id] ?? (0, 0)
            // A thread id reused by a new thread reads less than before: count it from zero.
            let fresh = now.running < before.running || now.waiting < before.waiting
            running += fresh ? now.running : now.running - before.running
            waiting += fresh ? now.waiting : now.waiting - before.waiting
        }
        return running + waiting == 0 ? 0 : Double(waiting) / Double(running + waiting)
    }
}
