@testable import Chronicle
import ChronicleTesting
import Foundation
import Subprocess
import SystemPackage
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A mailbox folder as another device (or a sync service acting for it) changes it while a pull runs.
private struct RacingMailbox: SyncTransport {
    let inner: DirectoryTransport
    /// Runs once, right before the first pull is answered.
    let beforeFirstPull: @Sendable () throws -> Void
    let fired = Fired()
    final class Fired: Sendable { let value = Mutex(false) }

    func info() async throws -> ReplicaInfo { try await inner.info() }

    func pull(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) async throws -> Data {
        if fired.value.withLock({ done in defer { done = true }; return !done }) { try beforeFirstPull() }
        return try await inner.pull(after: after, filter: filter, excludingOrigin: origin, maxEvents: maxEvents)
    }

    func push(_ range: Data) async throws -> RangeReceipt { try await inner.push(range) }
}

/// Attacks on the fault-handling changes (compaction, mailboxes, reclaim) found by a hostile review.
struct FaultReviewTests {
    private static func rangeNames(_ folder: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent("ranges").path)
            .filter { $0.hasSuffix(".range") }.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    // MARK: - Mailbox

    /// Pruning as the README advises (files every device has synced past) lands between the
    /// reader's `info()` and its pull: the folder now holds fewer files than the reader's
    /// checkpoint, `pullNow` starts at the file count, the Replicator skips its chain check
    /// (`range.after != after`) and stores a checkpoint past a file it never read.
    @Test func pruningDuringAPullNeverSkipsANewFile() async throws {
        try await withStores(2) { stores in
            let (writer, reader) = (stores[0], stores[1])
            let folder = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: folder) }
            for i in 0..<3 {
                writer[Key<String>("sync.k\(i)", default: "", sync: .manual)] = "v\(i)"
                try await Replicator(store: writer, peers: [.directory(folder)]).sync()
                try await Task.sleep(for: .milliseconds(3))
            }
            try await Replicator(store: reader, peers: [.directory(folder)]).sync()
            #expect(reader[Key<String>("sync.k2", default: "", sync: .manual)] == "v2")
            // The reader pulled the writer's three files (checkpoint 3), then pushed what it had
            // learned back as a fourth file.
            let old = try Self.rangeNames(folder)
            #expect(old.count == 4)
            // A new push arrives; then a device prunes the writer's three old files, which every
            // device (the reader included) has read, while the reader is between info() and pull().
            writer[Key<String>("sync.new", default: "", sync: .manual)] = "must arrive"
            try await Replicator(store: writer, peers: [.directory(folder)]).sync()
            let ranges = folder.appendingPathComponent("ranges")
            let mailbox = RacingMailbox(inner: DirectoryTransport(directory: folder)) {
                for name in old.prefix(3) { try FileManager.default.removeItem(at: ranges.appendingPathComponent(name)) }
            }
            try await Replicator(store: reader, peers: [Peer(name: "mailbox", transport: mailbox)]).sync()
            // Later syncs, with the folder quiet, do not bring it either.
            try await Replicator(store: reader, peers: [.directory(folder)]).sync()
            try await Replicator(store: reader, peers: [.directory(folder)]).sync()
            #expect(reader[Key<String>("sync.new", default: "", sync: .manual)] == "must arrive")
        }
    }

    /// A file that is not readable yet when a pull reaches it (copied in place by `cp`, a USB
    /// stick, an SMB share; an iCloud/OneDrive placeholder whose download fails offline) is
    /// passed over, and the checkpoint (position + digest of names) moves past it. When its
    /// bytes arrive under the same name, neither count nor names change: never read.
    @Test func aFileThatBecomesReadableLaterIsRead() async throws {
        try await withStores(2) { stores in
            let (writer, reader) = (stores[0], stores[1])
            let writerFolder = temporaryDirectory()
            let readerFolder = temporaryDirectory()
            defer { for folder in [writerFolder, readerFolder] { try? FileManager.default.removeItem(at: folder) } }
            writer[.note] = "from the writer"
            try await Replicator(store: writer, peers: [.directory(writerFolder)]).sync()
            let name = try #require(try Self.rangeNames(writerFolder).first)
            let bytes = try Data(contentsOf: writerFolder.appendingPathComponent("ranges").appendingPathComponent(name))
            // The sync service (or cp) has created the file and written half of it.
            let target = readerFolder.appendingPathComponent("ranges")
            try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: writerFolder.appendingPathComponent("mailbox.id"), to: readerFolder.appendingPathComponent("mailbox.id"))
            try bytes.prefix(bytes.count / 2).write(to: target.appendingPathComponent(name))
            try await Replicator(store: reader, peers: [.directory(readerFolder)]).sync()
            // The copy completes.
            try bytes.write(to: target.appendingPathComponent(name))
            try await Replicator(store: reader, peers: [.directory(readerFolder)]).sync()
            #expect(reader[.note] == "from the writer")
        }
    }

    // MARK: - Reclaim

    /// An app that opens the store while `compact --reclaim` copies it: the reclaim used to hold
    /// it off in `mdb_env_open`, and the app then woke to a lock file describing the old file
    /// (LMDB picked a meta page of the copy by the stale transaction id's parity and could
    /// overwrite the real one). Now nobody is held off, and a reclaim that meets an opener or a
    /// commit during its copy changes nothing. Whatever the interleaving, no write is lost and
    /// the store verifies.
    @Test(arguments: [false, true]) func anOpenerDuringReclaimLosesNothing(pad: Bool) async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let blob = Data(repeating: 7, count: 256 * 1024)
        let replica: ReplicaID
        do {
            let store = try Store(directory: directory)
            for i in 0..<240 { store[Key<Data>("blob.\(i)", default: Data())] = blob }
            if pad { store[Key<Int>("pad", default: 0)] = 1 }
            replica = try store.replicaID
        }
        let tool = try chronicleExecutable()
        let opened = try await Subprocess.run(
            .path(FilePath(tool.path)),
            arguments: Arguments(["compact", "--store", directory.path, "--before", "2001-01-01", "--reclaim"]),
            input: .none, output: .discarded, error: .discarded
        ) { _ -> Result<(ReplicaID, Data, Bool), any Error> in
            await Task.detached { () -> Result<(ReplicaID, Data, Bool), any Error> in
                Result {
                    let store = try Store(directory: directory)
                    let value = store[Key<Data>("blob.17", default: Data())]
                    try store.set("written during the reclaim", for: Key<String>("after", default: ""))
                    return (try store.replicaID, value, try store.verify().isSound)
                }
            }.value
        }.closureResult
        let (seenReplica, value, sound) = try opened.get()
        #expect(seenReplica == replica)
        #expect(value == blob)
        #expect(sound)
        let reopened = try Store(directory: directory)
        #expect(try reopened.replicaID == replica)
        #expect(reopened[Key<Data>("blob.17", default: Data())] == blob)
        #expect(reopened[Key<String>("after", default: "")] == "written during the reclaim")
        #expect(try reopened.verify().isSound)
    }
}
