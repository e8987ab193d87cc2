@_spi(Wire) @testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Synchronization
import Testing

/// What a device leaves out of a push because the peer sent it must be exactly what that peer
/// holds: never an event released from the quarantine, never what a peer lost when it rolled
/// back, and a mailbox restored from a backup is refilled even by a device that only reads.
struct EchoFreeReplicationRecoveryTests {
    static func key(_ name: String) -> Key<String> { Key<String>("edge.\(name)", default: "", sync: .manual) }

    /// Counts what is pushed through a transport; optionally runs `beforePull` before each
    /// pull-phase pull (a pull that leaves out an origin).
    final class Spy: SyncTransport, @unchecked Sendable {
        let inner: any SyncTransport
        let pushed = Mutex<[Event]>([])
        let pulls = Mutex(0)
        let beforePull: (@Sendable (Int) throws -> Void)?
        init(_ inner: any SyncTransport, beforePull: (@Sendable (Int) throws -> Void)? = nil) {
            self.inner = inner
            self.beforePull = beforePull
        }
        func info() async throws -> ReplicaInfo { try await inner.info() }
        func pull(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) async throws -> Data {
            if origin != nil {
                let n = pulls.withLock { $0 += 1; return $0 }
                try beforePull?(n)
            }
            return try await inner.pull(after: after, filter: filter, excludingOrigin: origin, maxEvents: maxEvents)
        }
        func push(_ range: Data) async throws -> RangeReceipt {
            let events = try EventRange(decoding: Array(range)).events
            pushed.withLock { $0 += events }
            return try await inner.push(range)
        }
    }

    // MARK: Released quarantine items are not the sender's

    /// Six members' keys arrive in one batch from relay A: four are derived, two wait (the
    /// derivation budget), and their events wait for their keys. The retry of waiting records
    /// (on a thread of its own, started by the import) derives the two and releases their
    /// events, which came from A, not from B: the next sync pushes them to B, so a device that
    /// syncs only through B gets all six.
    ///
    /// Each sync is followed by a wait for that retry (the condition the next sync needs): the
    /// test once checked right after the second sync and failed whenever the retry thread had
    /// not run yet (4 of 6, in most runs while other work kept both cores busy).
    @Test func eventsReleasedFromTheQuarantineArePushedToThePeersTheyDidNotComeFrom() async throws {
        let directories = (0..<10).map { _ in temporaryDirectory() }
        defer { for directory in directories { try? FileManager.default.removeItem(at: directory) } }
        var relayConfiguration = Store.Configuration()
        relayConfiguration.travelKeyCost = .minimumForTesting  // the members' (test) travel cost
        let relayA = try Store(directory: directories[0], configuration: relayConfiguration)
        let relayB = try Store(directory: directories[1], configuration: relayConfiguration)
        for i in 0..<6 {
            let member = try Store(directory: directories[2 + i], configuration: passphraseConfiguration("the group"))
            try member.set("from member \(i)", for: Self.key("m\(i)"))
            try await Replicator(store: member, peers: [.store(relayA)]).sync()
        }
        /// Syncs `store` with `peers`, then waits until no retry of waiting key records runs.
        func sync(_ store: Store, _ peers: [Peer]) async throws -> SyncReport {
            let report = try await Replicator(store: store, peers: peers).sync()
            store.waitForKeyRecordRetries()
            return report
        }
        let device = try Store(directory: directories[8], configuration: passphraseConfiguration("the group"))
        _ = try await sync(device, [.store(relayA), .store(relayB)])
        let held = (0..<6).filter { device[Self.key("m\($0)")] == "from member \($0)" }
        #expect(held.count == 6, "the device holds \(held)")
        let report = try await sync(device, [.store(relayA), .store(relayB)])
        let atB = try (0..<6).filter { i in
            try relayB.history(of: Self.key("m\(i)")).isEmpty == false
        }
        #expect(atB.count == 6, "relay B holds only \(atB) of the six; pushed to B: \(report.peers.map { ($0.peer, $0.sent) })")
        // A member that syncs only through B: four derivations in the import, the rest in the retry.
        let other = try Store(directory: directories[9], configuration: passphraseConfiguration("the group"))
        _ = try await sync(other, [.store(relayB)])
        let seen = (0..<6).filter { other[Self.key("m\($0)")] == "from member \($0)" }
        #expect(seen.count == 6, "a member behind B sees only \(seen)")
    }

    // MARK: A peer that rolls back between two pull batches

    /// A peer (non-passive) that is rolled back between two batches of one pull: the first batch
    /// came from the log it lost. The exchange notices (it starts over and pushes from 0) and
    /// forgets what that batch brought, so the event the peer lost is pushed back to it.
    final class RolledBackPeer: SyncTransport, @unchecked Sendable {
        let id = ReplicaID.random()
        let epoch = LogEpoch.random()
        let writer = ReplicaID.random()
        let lost: Event
        let kept: Event
        let state = Mutex<(rolledBack: Bool, pushed: [Event])>((false, []))
        static let zero = LogHead.empty.chain
        static let c1 = [UInt8](repeating: 1, count: LogHead.empty.chain.count)
        static let c1b = [UInt8](repeating: 2, count: LogHead.empty.chain.count)
        static let c2 = [UInt8](repeating: 3, count: LogHead.empty.chain.count)
        init(lost: Event, kept: Event) { (self.lost, self.kept) = (lost, kept) }

        func info() async throws -> ReplicaInfo {
            ReplicaInfo(replicaID: id, epoch: epoch, protocolVersion: EventRange.protocolVersion, head: 2, writer: writer)
        }
        func pull(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) async throws -> Data {
            let range: EventRange = state.withLock { state in
                if origin == nil || after >= 2 {  // probes, and pulls at the head
                    return EventRange(source: id, epoch: epoch, after: 2, upTo: 2, head: 2, afterChain: Self.c2, upToChain: Self.c2, keys: [], events: [])
                }
                if !state.rolledBack {
                    if after == 0 {
                        return EventRange(source: id, epoch: epoch, after: 0, upTo: 1, head: 2, afterChain: Self.zero, upToChain: Self.c1, keys: [], events: [lost])
                    }
                    state.rolledBack = true  // restored from a backup between the two batches
                    return EventRange(source: id, epoch: epoch, after: 1, upTo: 2, head: 2, afterChain: Self.c1b, upToChain: Self.c2, keys: [], events: [kept])
                }
                return EventRange(source: id, epoch: epoch, after: 0, upTo: 2, head: 2, afterChain: Self.zero, upToChain: Self.c2, keys: [], events: [kept])
            }
            return Data(range.encoded())
        }
        func push(_ range: Data) async throws -> RangeReceipt {
            let events = try EventRange(decoding: Array(range)).events
            state.withLock { $0.pushed += events }
            return RangeReceipt()
        }
    }

    @Test func aPeerRolledBackBetweenTwoPullBatchesGetsTheLostEventBack() async throws {
        try await withTemporaryStores(2) { stores in
            let (source, device) = (stores[0], stores[1])
            try source.set("lost by the peer", for: Self.key("lost"))
            try source.set("kept", for: Self.key("kept"))
            let events = try EventRange(decoding: Array(try source.exportRange(after: 0))).events
            let peer = RolledBackPeer(lost: events[0], kept: events[1])
            try device.set("own", for: Self.key("own"))
            var configuration = Replicator.Configuration()
            configuration.batchEvents = 1
            let replicator = Replicator(store: device, peers: [Peer(name: "rolled back", transport: peer)], configuration: configuration)
            _ = try await replicator.sync()
            _ = try await replicator.sync()
            #expect(device[Self.key("lost")] == "lost by the peer")
            let pushed = peer.state.withLock { $0.pushed.map(\.key) }
            #expect(pushed.contains("edge.own"), "its own event went up: \(pushed)")
            #expect(pushed.contains("edge.lost"), "the event the peer lost was never pushed back: pushed \(pushed)")
        }
    }

    // MARK: Compaction between the pull and the push

    /// The device compacts (renumbering its log) between two pull batches; the stale windows are
    /// applied to the new numbering during that push, but the push writes under the old epoch's
    /// key, so the next sync pushes from the carried checkpoint and nothing is lost.
    @Test func compactionDuringAnExchangeLosesNothing() async throws {
        try await withTemporaryStores(3) { stores in
            let (writer, relay, device) = (stores[0], stores[1], stores[2])
            try device.set("first", for: Self.key("before"))
            _ = try await Replicator(store: device, peers: [.store(relay)]).sync()
            for i in 0..<6 { try device.set("v\(i)", for: Self.key("churn")) }
            for i in 0..<4 { try writer.set("w\(i)", for: Self.key("w\(i)")) }
            _ = try await Replicator(store: writer, peers: [.store(relay)]).sync()
            for i in 0..<4 { try device.set("o\(i)", for: Self.key("o\(i)")) }
            let compacted = Mutex(false)
            let spy = Spy(StoreTransport(store: relay)) { n in
                if n == 2 {
                    let report = try device.compact()
                    compacted.withLock { $0 = report.dropped > 0 }
                }
            }
            var configuration = Replicator.Configuration()
            configuration.batchEvents = 2
            let replicator = Replicator(store: device, peers: [Peer(name: "relay", transport: spy)], configuration: configuration)
            _ = try await replicator.sync()
            #expect(compacted.withLock { $0 })
            _ = try await replicator.sync()
            for i in 0..<4 { #expect(relay[Self.key("o\(i)")] == "o\(i)") }
            #expect(relay[Self.key("churn")] == "v5")
            for i in 0..<4 { #expect(device[Self.key("w\(i)")] == "w\(i)") }
        }
    }

    // MARK: A mailbox restored from a backup, seen by a device that only reads

    /// A writer pushes to a mailbox and retires. A reader pulls everything and pushes nothing back;
    /// it marks the newest file it pulled. The folder is restored from an older backup (here:
    /// empty): the mark is gone, so the reader pushes its whole log again and a new device gets it.
    @Test func aMailboxRestoredFromABackupIsRefilledByAReader() async throws {
        try await withTemporaryStores(3) { stores in
            let (writer, reader, newcomer) = (stores[0], stores[1], stores[2])
            let folder = temporaryStoreDirectory()
            defer { try? FileManager.default.removeItem(at: folder) }
            try writer.write { batch in for i in 0..<3 { batch[Self.key("y\(i)")] = "y\(i)" } }
            _ = try await Replicator(store: writer, peers: [.directory(folder)]).sync()
            _ = try await Replicator(store: reader, peers: [.directory(folder)]).sync()
            #expect(reader[Self.key("y2")] == "y2")
            // Restored from a backup taken before the writer's file (or pruned down to nothing).
            let ranges = folder.appendingPathComponent("ranges")
            for file in try FileManager.default.contentsOfDirectory(at: ranges, includingPropertiesForKeys: nil) {
                try FileManager.default.removeItem(at: file)
            }
            for _ in 0..<2 { _ = try await Replicator(store: reader, peers: [.directory(folder)]).sync() }
            _ = try await Replicator(store: newcomer, peers: [.directory(folder)]).sync()
            #expect(newcomer[Self.key("y2")] == "y2", "the reader holds the writer's events but never put them back")
        }
    }

    // MARK: A hostile peer echoing the device's own events

    /// A peer that serves the device's own events back (and a forgery under its current writer)
    /// makes nothing of the device's own skipped: they are duplicates or rejected, never appended.
    final class EchoingPeer: SyncTransport, @unchecked Sendable {
        let id = ReplicaID.random()
        let epoch = LogEpoch.random()
        let served: [Event]
        let pushed = Mutex<[Event]>([])
        init(served: [Event]) { self.served = served }
        func info() async throws -> ReplicaInfo {
            ReplicaInfo(replicaID: id, epoch: epoch, protocolVersion: EventRange.protocolVersion, head: 1, writer: .random())
        }
        func pull(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) async throws -> Data {
            let events = after == 0 && origin != nil ? served : []
            let start = min(after, 1)
            return Data(EventRange(source: id, epoch: epoch, after: start, upTo: 1, head: 1, keys: [], events: events).encoded())
        }
        func push(_ range: Data) async throws -> RangeReceipt {
            let events = try EventRange(decoding: Array(range)).events
            pushed.withLock { $0 += events }
            return RangeReceipt()
        }
    }

    @Test func aPeerEchoingTheDevicesOwnEventsCannotMakeItWithholdThem() async throws {
        try await withTemporaryStore { device, _ in
            try device.set("a", for: Self.key("a"))
            try device.set("b", for: Self.key("b"))
            var own = try EventRange(decoding: Array(try device.exportRange(after: 0))).events
            var forged = own[0]
            forged.counter += 10
            forged.payload = Array("x".utf8)
            own.append(forged)
            try device.set("c", for: Self.key("c"))
            let peer = EchoingPeer(served: own)
            let report = try await Replicator(store: device, peers: [Peer(name: "echo", transport: peer)]).sync()
            #expect(report.peers.first?.pulled.applied == 0)
            let pushed = Set(peer.pushed.withLock { $0.map(\.key) })
            #expect(pushed == ["edge.a", "edge.b", "edge.c"], "pushed \(pushed)")
        }
    }
}
