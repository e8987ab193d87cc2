import Logging
import Foundation
import Synchronization

/// One ``EventLog`` per store directory per process.
///
/// LMDB forbids opening one environment twice in a process (closing either
/// handle drops the process's file locks), so every ``Store`` on a directory
/// holds a lease on one shared eventLog; the eventLog closes when the last lease
/// ends. Opening and closing run under one lock, so an old environment is
/// always closed before a new one on the same file opens.
enum EventLogRegistry {
    private struct Entry {
        let eventLog: EventLog
        var leases: Int
    }

    private static let entries = Mutex<[String: Entry]>([:])

    /// A lease on the eventLog for `directory`, opening it if needed.
    static func lease(directory: URL, configuration: Store.Configuration) throws(ChronicleError) -> EventLogLease {
        let path = try prepareDirectory(directory)
        return try entries.withLock { entries throws(ChronicleError) in
            if var entry = entries[path] {
                entry.leases += 1
                entries[path] = entry
                return EventLogLease(eventLog: entry.eventLog)
            }
            let eventLog = try mappingErrors {
                try EventLog(directory: path, configuration: configuration)
            }
            entries[path] = Entry(eventLog: eventLog, leases: 1)
            return EventLogLease(eventLog: eventLog)
        }
    }

    /// Whether this process has the store at `path` open.
    static func isOpen(path: String) -> Bool {
        entries.withLock { $0[path] != nil }
    }

    static func release(path: String) {
        entries.withLock { entries in
            guard var entry = entries[path] else { return }
            entry.leases -= 1
            if entry.leases == 0 {
                // Changes of the non-throwing forms still queued are committed before the
                // environment closes (a later open in this process must find no second one).
                do { try entry.eventLog.settlePending() } catch {
                    entry.eventLog.logger.error(
                        "chronicle: changes made with non-throwing setters were lost as the store closed",
                        metadata: ["error": "\(ChronicleError.wrap(error))", "store": "\(path)"])
                }
                entries[path] = nil  // the eventLog (and its environment) closes here, under the lock
            } else {
                entries[path] = entry
            }
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
final class EventLogLease: Sendable {
    let eventLog: EventLog

    init(eventLog: EventLog) { self.eventLog = eventLog }

    deinit { EventLogRegistry.release(path: eventLog.path) }
}
