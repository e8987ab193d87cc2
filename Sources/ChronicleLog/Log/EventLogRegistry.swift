package import ChronicleFormat
import Logging
package import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One ``EventLog`` per store directory per process.
///
/// LMDB forbids opening one environment twice in a process (closing either handle drops the
/// process's file locks), so every ``Store`` on a directory holds a lease on one shared log.
/// When the last lease ends, the log's queued changes are committed and the registry lets go of
/// it; but whatever still holds the log (a queued change's keyring, a change stream, a
/// replicator) keeps it, and with it its environment, open: a reopen meanwhile is handed that
/// same log, never a second environment on the file. (``ChronicleLMDB/Environment`` refuses a
/// second one in a process as well.)
///
/// At a normal exit (`exit`, or returning from `main`), every open log commits what the
/// non-throwing forms queued: a short-lived tool or a global `Store` loses no write.
package enum EventLogRegistry {
    private struct Entry {
        /// Held while leases exist.
        var held: EventLog?
        /// The log, while anything at all holds it.
        weak var live: EventLog?
        var leases: Int
    }

    private static let entries = Mutex<[String: Entry]>([:])

    /// A lease on the log for `directory`, opening it if needed. Every path to one directory (a
    /// symbolic link, a bind mount) leases the same log: entries are keyed by the directory's
    /// device and inode. An open log keeps its directory open, so a directory deleted while
    /// something holds its log keeps its inode, and one created at its path is another store.
    package static func lease(directory: URL, configuration: LogOptions) throws(ChronicleError) -> EventLogLease {
        let path = try prepareDirectory(directory)
        guard let identity = identity(of: path) else { throw .io(path: path, reason: "the store's directory cannot be examined") }
        _ = installExitHook
        return try entries.withLock { entries throws(ChronicleError) in
            if var entry = entries[identity], let eventLog = entry.live {
                // Another process may have damaged the file since this one opened it.
                try mappingErrors { try eventLog.refuseForgottenChainKey() }
                if entry.leases == 0 { eventLog.sweeper.resumeSweeping() }
                entry.leases += 1
                entry.held = eventLog
                entries[identity] = entry
                return EventLogLease(eventLog: eventLog, identity: identity)
            }
            // The first opening in this process: a purge's bytes leave the file now if no other
            // process has it open (never for a salvage, which writes nothing to what it reads).
            if !configuration.salvage { PurgedBytes.eraseIfMarked(path: path, logger: configuration.logger) }
            let eventLog = try mappingErrors {
                try EventLog(directory: path, configuration: configuration)
            }
            entries[identity] = Entry(held: eventLog, live: eventLog, leases: 1)
            return EventLogLease(eventLog: eventLog, identity: identity)
        }
    }

    /// The directory's device and inode, the registry's key; `nil` when it cannot be examined.
    package static func identity(of path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return "\(status.st_dev):\(status.st_ino)"
    }

    /// Whether this process has the store at `path` open (anything still holds its log).
    package static func isOpen(path: String) -> Bool {
        guard let identity = identity(of: path) else { return false }
        return entries.withLock { $0[identity]?.live != nil }
    }

    /// Signalled each time a log closes (``waitUntilClosed(path:timeout:)``).
    private static let closedSignal = NSCondition()

    /// A log closed (its last holder let go): wakes who waits for one to close.
    static func logClosed() {
        closedSignal.lock()
        closedSignal.broadcast()
        closedSignal.unlock()
    }

    /// Waits until this process no longer has the store at `path` open (``isOpen(path:)``), at
    /// most `timeout` (a bound that tells a log something keeps open from a slow machine).
    /// - Returns: whether it closed.
    package static func waitUntilClosed(path: String, timeout: Duration) -> Bool {
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        let deadline = Date(timeIntervalSinceNow: seconds)
        closedSignal.lock()
        defer { closedSignal.unlock() }
        while isOpen(path: path) {
            // Checked and waited for under the signal's lock: a close in between is not missed.
            if !closedSignal.wait(until: deadline) { return !isOpen(path: path) }
        }
        return true
    }

    /// Runs `body` while this process has the store at `path` closed and opens no store until
    /// `body` returns (an open on another thread waits): for replacing the data file.
    /// - Throws: ``ChronicleError/invalidArgument(_:)`` when the store is open in this process.
    package static func whileClosed<R>(path: String, _ body: () throws(ChronicleError) -> R) throws(ChronicleError) -> R {
        let identity = identity(of: path) ?? path
        return try entries.withLock { entries throws(ChronicleError) in
            guard entries[identity]?.live == nil else {
                throw .invalidArgument("the store is open in this process; close every Store on it first")
            }
            return try body()
        }
    }

    package static func release(identity: String) {
        // Settled outside the registry's lock: a commit may take a while, and other stores open meanwhile.
        var closing = entries.withLock { entries -> EventLog? in
            guard var entry = entries[identity] else { return nil }
            entry.leases -= 1
            let closing = entry.leases == 0 ? entry.held : nil
            if entry.leases == 0 { entry.held = nil }
            entries[identity] = entry
            return closing
        }
        guard closing != nil else { return }
        // Waits for a pass of the automatic compaction in progress. A lease taken meanwhile (it
        // resumed sweeping before this stopped it) resumes it again below.
        closing?.sweeper.stopSweeping()
        if entries.withLock({ ($0[identity]?.leases ?? 0) > 0 }) { closing?.sweeper.resumeSweeping() }
        // Changes of the non-throwing forms still queued are committed before the log can close.
        if let eventLog = closing {
            do { try eventLog.local.settlePending() } catch {
                eventLog.logger.error(
                    "chronicle: changes made with non-throwing setters were lost as the store closed",
                    metadata: ["error": "\(ChronicleError.wrap(error))", "store": "\(eventLog.path)"])
            }
        }
        // The log closes here, on this thread and outside the lock, unless something else holds it
        // (a lease taken meanwhile, a stream, a queued change): then it stays the one open log.
        closing = nil
        entries.withLock { entries in
            if let entry = entries[identity], entry.leases == 0, entry.live == nil { entries[identity] = nil }
        }
    }

    /// Every log this process has open.
    private static var openLogs: [EventLog] {
        entries.withLock { entries in entries.values.compactMap(\.live) }
    }

    /// Installed once, with the first store: at a normal exit every open log commits its queue.
    private static let installExitHook: Void = {
        atexit { EventLogRegistry.settleAtExit() }
    }()

    /// Commits what the non-throwing forms queued in every open log. It waits as long as this
    /// opening's committer finishes groups (the backlog ahead of the exit is finite, so the wait
    /// ends), and gives up after ten seconds without one: an exit must not hang on a disk that
    /// stopped answering, nor drop a backlog that a slow machine is still writing (a fixed ten
    /// seconds lost a quarter of 20,000 queued changes with both cores busy). The committer's
    /// own count, not the file's last transaction: another process's commits say nothing of this
    /// queue, and reading the environment takes a lock a stalled resize can hold.
    private static func settleAtExit() {
        for eventLog in openLogs {
            let done = DispatchSemaphore(value: 0)
            let outcome = Mutex<(any Error)?>(nil)
            eventLog.local.settlePending { result in
                if case let .failure(error) = result { outcome.withLock { $0 = error } }
                done.signal()
            }
            let committer = eventLog.local.committer.withLock { $0 }
            var progress = committer?.groupsRun ?? 0
            var stalled = false
            while !stalled, done.wait(timeout: .now() + .seconds(10)) == .timedOut {
                let now = committer?.groupsRun ?? 0
                (stalled, progress) = (now == progress, now)
            }
            if stalled {
                eventLog.logger.error(
                    "chronicle: queued changes were still not committed at exit",
                    metadata: ["store": "\(eventLog.path)", "queued": "\(eventLog.local.pendingCount.load(ordering: .acquiring))"])
            } else if let error = outcome.withLock({ $0 }) {
                eventLog.logger.error(
                    "chronicle: queued changes could not be committed at exit",
                    metadata: ["error": "\(ChronicleError.wrap(error))", "store": "\(eventLog.path)"])
            }
            try? eventLog.flushFile()
        }
    }

    /// Creates the directory (0700) when needed and returns its canonical path.
    private static func prepareDirectory(_ directory: URL) throws(ChronicleError) -> String {
        let path = directory.standardizedFileURL.path
        try PrivateFiles.createDirectory(URL(fileURLWithPath: path, isDirectory: true))
        return URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    }
}

/// A ``Store``'s hold on its shared ``EventLog``.
package final class EventLogLease: Sendable {
    package let eventLog: EventLog
    /// The registry's key for the log's directory.
    package let identity: String

    package init(eventLog: EventLog, identity: String) {
        self.eventLog = eventLog
        self.identity = identity
    }

    deinit { EventLogRegistry.release(identity: identity) }
}
