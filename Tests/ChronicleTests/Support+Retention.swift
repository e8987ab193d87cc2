@testable import Chronicle
@testable import ChronicleLog
import ChronicleLMDB
import Foundation

// What the tests of retention, the automatic compaction and the registry share: waits on the
// sweep and on a log's closing (never polls), and the log's records counted raw.

/// Returns once no pass of the store's automatic compaction runs: the passes its commits
/// started have dropped what they drop (waited for on a thread of its own: the wait blocks).
func sweepsSettle(_ store: Store) async throws {
    let eventLog = try store.eventLog
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        Thread {
            eventLog.sweeper.waitForPasses()
            done.resume()
        }.start()
    }
}

/// Whether this process lets go of the store at `path` within `timeout` (a hang guard), waited
/// for on a thread of its own: what holds the log may need the cooperative pool to let go.
func logCloses(_ path: String, within timeout: Duration = hangGuard) async -> Bool {
    await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
        Thread { done.resume(returning: EventLogRegistry.waitUntilClosed(path: path, timeout: timeout)) }.start()
    }
}

/// The records of a store's log by kind (events, gaps, others), read straight from LMDB.
func recordKinds(_ store: Store) throws -> (events: Int, gaps: Int, other: Int) {
    let eventLog = try store.eventLog
    return try eventLog.environment.read { txn in
        var counts = (events: 0, gaps: 0, other: 0)
        try txn.scan(eventLog.dbs.events) { _, value in
            switch value.first {
            case RecordKind.event.rawValue: counts.events += 1
            case RecordKind.gap.rawValue: counts.gaps += 1
            default: counts.other += 1
            }
            return true
        }
        return counts
    }
}

/// The pages a store's databases occupy (every B-tree's branch, leaf and overflow pages): what
/// its records cost, independent of when LMDB reused freed pages.
func pagesInUse(_ store: Store) throws -> Int {
    let eventLog = try store.eventLog
    return try eventLog.environment.read { txn in
        try eventLog.dbs.all.reduce(0) { $0 + (try txn.pages($1)) }
    }
}
