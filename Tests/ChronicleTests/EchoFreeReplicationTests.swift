@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Testing

/// A device never pushes back what it pulled from the same peer: every event reaches a relay
/// (a store, a mailbox folder, the hub) once per writer, not once per device that read it.
struct EchoFreeReplicationTests {
    static func key(_ i: Int) -> Key<Int> { Key<Int>("echo.\(i)", default: 0, sync: .manual) }

    /// A reader that only pulls sends nothing back: it used to push every event it pulled.
    @Test func aReaderPushesNothingBackToTheRelayItPulledFrom() async throws {
        try await withTemporaryStores(3) { stores in
            let (writer, relay, reader) = (stores[0], stores[1], stores[2])
            try writer.write { batch in for i in 0..<40 { batch[Self.key(i)] = i } }
            let up = try await Replicator(store: writer, peers: [.store(relay)]).sync()
            #expect(up.sent == 40)
            let down = try await Replicator(store: reader, peers: [.store(relay)]).sync()
            #expect(down.peers.first?.pulled.applied == 40)
            #expect(down.sent == 0, "the reader pushed \(down.sent) events back to the relay they came from")
            #expect(reader[Self.key(39)] == 39)
            // Its own later write still goes up, and only it.
            try reader.set(1, for: Self.key(100))
            let next = try await Replicator(store: reader, peers: [.store(relay)]).sync()
            #expect(next.sent == 1)
            #expect(relay[Self.key(100)] == 1)
        }
    }

    /// A local change made before the sync (pushed after the pull) goes up; what was pulled in
    /// the same sync does not come back.
    @Test func aWriterPushesItsOwnChangesButNotWhatItPulled() async throws {
        try await withTemporaryStores(3) { stores in
            let (first, relay, second) = (stores[0], stores[1], stores[2])
            try first.write { batch in for i in 0..<10 { batch[Self.key(i)] = i } }
            _ = try await Replicator(store: first, peers: [.store(relay)]).sync()
            try second.write { batch in for i in 10..<15 { batch[Self.key(i)] = i } }
            let report = try await Replicator(store: second, peers: [.store(relay)]).sync()
            #expect(report.peers.first?.pulled.applied == 10)
            #expect(report.sent == 5, "its own five, not the ten it pulled")
            #expect(relay[Self.key(14)] == 14)
            _ = try await Replicator(store: first, peers: [.store(relay)]).sync()
            #expect(first[Self.key(12)] == 12)
        }
    }

    /// Three devices sharing a mailbox folder: the folder holds each event once (it held each
    /// event once per device: 90 for 30).
    @Test func aMailboxHoldsEachEventOnce() async throws {
        try await withTemporaryStores(3) { stores in
            let folder = temporaryStoreDirectory()
            defer { try? FileManager.default.removeItem(at: folder) }
            for (index, store) in stores.enumerated() {
                try store.write { batch in for i in 0..<10 { batch[Self.key(index * 10 + i)] = i } }
            }
            for _ in 0..<2 {
                for store in stores { _ = try await Replicator(store: store, peers: [.directory(folder)]).sync() }
            }
            for store in stores { #expect(store[Self.key(29)] == 9 && store[Self.key(0)] == 0) }
            let files = try FileManager.default.contentsOfDirectory(
                at: folder.appendingPathComponent("ranges"), includingPropertiesForKeys: nil)
            let events = try files.reduce(0) { $0 + (try EventRange(decoding: Array(try Data(contentsOf: $1))).events.count) }
            #expect(events == 30, "the mailbox holds \(events) events for 30")
        }
    }
}
