import Foundation
import Synchronization

/// One ``Engine`` per store directory per process.
///
/// LMDB forbids opening one environment twice in a process (closing either
/// handle drops the process's file locks), so every ``Store`` on a directory
/// holds a lease on one shared engine; the engine closes when the last lease
/// ends. Opening and closing run under one lock, so an old environment is
/// always closed before a new one on the same file opens.
enum EngineRegistry {
    private struct Entry {
        let engine: Engine
        var leases: Int
    }

    private static let entries = Mutex<[String: Entry]>([:])

    /// A lease on the engine for `directory`, opening it if needed.
    static func lease(directory: URL, configuration: Store.Configuration) throws(ChronicleError) -> EngineLease {
        let path = try prepareDirectory(directory)
        return try entries.withLock { entries throws(ChronicleError) in
            if var entry = entries[path] {
                entry.leases += 1
                entries[path] = entry
                return EngineLease(engine: entry.engine)
            }
            let engine = try mappingErrors {
                try Engine(directory: path, configuration: configuration)
            }
            entries[path] = Entry(engine: engine, leases: 1)
            return EngineLease(engine: engine)
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
                entries[path] = nil  // the engine (and its environment) closes here, under the lock
            } else {
                entries[path] = entry
            }
        }
    }

    /// Creates the directory (0700) when needed and returns its canonical path.
    private static func prepareDirectory(_ directory: URL) throws(ChronicleError) -> String {
        let path = directory.standardizedFileURL.path
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw .io(path: path, reason: "cannot create the store directory: \(error.localizedDescription)")
        }
        return URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    }
}

/// A ``Store``'s hold on its shared ``Engine``.
final class EngineLease: Sendable {
    let engine: Engine

    init(engine: Engine) { self.engine = engine }

    deinit { EngineRegistry.release(path: engine.path) }
}
