@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Testing

/// A replica whose files go back in time: a backup restored in place (same inode), a VM
/// snapshot rolled back, or commits lost to a power cut under `noSync`. It must keep syncing
/// both ways, get back what it had sent, and never mint an identity its peers already hold.
struct RollbackTests {
    static let values = (1...6).map { Key<Int>("rollback.k\($0)", default: 0, sync: .manual) }

    /// Overwrites `directory/data.mdb` with `bytes` in place: the same file, the same inode.
    func restoreInPlace(_ bytes: Data, into directory: URL) throws {
        let handle = try FileHandle(forWritingTo: directory.appendingPathComponent("data.mdb"))
        defer { try? handle.close() }
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: bytes)
        try handle.synchronize()
    }

    func dataFile(_ directory: URL) throws -> Data {
        try Data(contentsOf: directory.appendingPathComponent("data.mdb"))
    }

    @Test(arguments: [Durability.durable, .noSync(flushInterval: .seconds(3600))])
    func aReplicaRolledBackKeepsSyncingAndGetsBackWhatItHadSent(durability: Durability) async throws {
        let directories = (0..<2).map { _ in temporaryDirectory() }
        defer { for directory in directories { try? FileManager.default.removeItem(at: directory) } }
        var configuration = passphraseConfiguration("the group")
        configuration.durability = durability
        let b = try Store(directory: directories[1], configuration: configuration)
        let backup: Data
        do {
            let a = try Store(directory: directories[0], configuration: configuration)
            for key in Self.values.prefix(3) { try a.set(1, for: key) }
            try await Replicator(store: a, peers: [.store(b)]).sync()
            backup = try dataFile(directories[0])  // the snapshot the replica will go back to
            // After the snapshot: more writes, and they reach the peer.
            for key in Self.values[3...4] { try a.set(2, for: key) }
            try await Replicator(store: b, peers: [.store(a)]).sync()  // the peer's checkpoint now covers them
            #expect(b[Self.values[4]] == 2)
        }
        // The replica's files go back in time; the peer keeps what it got.
        try restoreInPlace(backup, into: directories[0])
        let a = try Store(directory: directories[0], configuration: configuration)
        #expect(a[Self.values[4]] == 0)
        // New writes land on sequence numbers the peer's checkpoint already covers.
        try a.set(3, for: Self.values[5])
        try a.set(3, for: Self.values[0])
        // The peer pulls first: its checkpoint says it has the replica's log up to a sequence
        // that now holds other records; it must notice, and pull the new writes.
        try await Replicator(store: b, peers: [.store(a)]).sync()
        #expect(b[Self.values[5]] == 3)
        let report = try await Replicator(store: a, peers: [.store(b)]).sync()
        #expect(report.peers.first?.pulled.quarantined == 0)
        for key in Self.values {
            #expect(a[key] == b[key], "\(key.name)")
        }
        #expect(b[Self.values[5]] == 3)  // the peer got the rolled-back replica's new writes
        #expect(a[Self.values[4]] == 2)  // and the replica got back what it had sent before the rollback
        #expect(b[Self.values[0]] == 3)
        #expect(try a.verify().isSound && b.verify().isSound)
        // Every identity is unique: nothing the replica wrote after the rollback collides.
        let identities = try a.logEntries().map { "\($0.writer):\($0.counter)" }
        #expect(Set(identities).count == identities.count)
    }

    @Test func everyOpeningWritesUnderANewWriter() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var writers: Set<ReplicaID> = []
        for round in 0..<3 {
            let store = try Store(directory: directory)
            try store.set(round, for: Self.values[0])
            writers.insert(try #require(try store.replicaInfo().writer))
        }
        #expect(writers.count == 3)
        let store = try Store(directory: directory)
        #expect(Set(try store.logEntries().map(\.writer)) == writers)
        #expect(Set(try store.logEntries().map(\.origin)) == [try store.replicaID])  // one device throughout
    }
}
