@testable import Chronicle
@testable import ChronicleLog
import Foundation
import Testing

/// One store directory is one store: the process's open logs are found by the directory's
/// identity, and a directory deleted while something still holds its log must never lend that
/// log to a directory created after it.
@Suite("A store directory")
struct StoreDirectoryTests {
    /// An app that signs out deletes its store directory while a change stream (here, the log
    /// itself) still holds the log, then creates a store at the same path. The open logs are
    /// keyed by the directory's device and inode, and a file system may hand the new directory
    /// the inode the deleted one freed (ext4 does for a directory that held no open file), so
    /// an open log keeps its directory open: the inode is never free while a log is keyed by it.
    @Test func aRecreatedDirectoryNeverGetsTheDeletedStoresLog() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = Key<Int>("account.visits", default: 0)
        var heldLogs: [EventLog] = []  // what change streams of the deleted stores would hold
        for round in 1...20 {
            do {
                let signedIn = try Store(directory: directory)
                try signedIn.set(round, for: key)
                heldLogs.append(try signedIn.eventLog)
            }
            try FileManager.default.removeItem(at: directory)
            let fresh = try Store(directory: directory)
            #expect(try heldLogs.allSatisfy { $0 !== (try fresh.eventLog) }, "round \(round): handed a deleted store's log")
            #expect(fresh[key] == 0, "round \(round): a new store reads the deleted store's value")
            try fresh.set(-round, for: key)
        }
        heldLogs.removeAll()
        // What the last new store wrote is on disk, under the path, after every log has closed.
        var reopened = try Store(directory: directory)
        #expect(reopened[key] == -20)
        try FileManager.default.removeItem(at: directory)
        reopened = try Store(directory: directory)
        #expect(reopened[key] == 0)
    }
}
