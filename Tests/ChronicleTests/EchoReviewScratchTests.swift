@_spi(Wire) @testable import Chronicle
import ChronicleTesting
import Foundation
import Synchronization
import Testing

/// Review of f52a033 ("Never push back what was pulled from the same peer"): attacks on the
/// push-phase `skipping:` windows.
struct EchoReviewScratchTests {
    static func key(_ name: String) -> Key<String> { Key<String>("review.\(name)", default: "", sync: .manual) }
    static func auto(_ i: Int) -> Key<Int> { Key<Int>("review.auto.\(i)", default: 0, sync: .automaticSmall) }

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

    // MARK: 1a. Released quarantine items land in another peer's window

    /// Six members' keys arrive in one batch from relay A: four are derived, two wait for the
    /// next import (the derivation budget), and their events wait for their keys. The next
    /// import is the (empty) pull from relay B: it derives the waiting keys and releases the
    /// events, which come from A, into B's window, so they are never pushed to B. A device that
    /// syncs only through B never sees them.
    @Test func eventsReleasedFromTheQuarantineDuringAnotherPeersPullAreNeverPushedToIt() async throws {
        let directories = (0..<9).map { _ in temporaryDirectory() }
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
        let device = try Store(directory: directories[8], configuration: passphraseConfiguration("the group"))
        let report = try await Replicator(store: device, peers: [.store(relayA), .store(relayB)]).sync()
        _ = try await Replicator(store: device, peers: [.store(relayA), .store(relayB)]).sync()
        let held = (0..<6).filter { device[Self.key("m\($0)")] == "from member \($0)" }
        print("DEBUG report", report.peers.map { ($0.pulled.applied, $0.pulled.quarantined, $0.pulled.keys, $0.sent) })
        print("DEBUG quarantine", try device.quarantinedItems().map { "\($0.reason) \($0.kind)" })
        print("DEBUG relayA", (0..<6).map { relayA[Self.key("m\($0)")] })
        #expect(held.count == 6, "the device holds \(held)")
        let atB = try (0..<6).filter { i in
            try relayB.history(of: Self.key("m\(i)")).isEmpty == false
        }
        #expect(atB.count == 6, "relay B holds only \(atB) of the six; pushed to B: \(report.peers.map { ($0.peer, $0.sent) })")
    }

    // MARK: 1b. The peer rolls back between two pull batches

    /// A peer (non-passive) that is rolled back between two batches of one pull: the first batch
    /// came from the log it lost. The exchange notices (startOver, remoteWentBack) and pushes
    /// from 0, but still skips the first batch's window, so the peer never gets back the event
    /// it lost, and the push checkpoint moves past it for good.
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

    @Test func aPeerRolledBackBetweenTwoPullBatchesNeverGetsTheLostEventBack() async throws {
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
            #expect(pushed.contains("review.own"), "its own event went up: \(pushed)")
            #expect(pushed.contains("review.lost"), "the event the peer lost was never pushed back: pushed \(pushed)")
        }
    }

    // MARK: 3. Mixed modes still echo

    /// `sync()` pulls, then automatic mode runs: the automatic push (its own checkpoint) sends
    /// back everything `sync()` pulled from the same relay.
    @Test func automaticModeAfterASyncEchoesWhatTheSyncPulled() async throws {
        try await withTemporaryStores(3) { stores in
            let (writer, relay, device) = (stores[0], stores[1], stores[2])
            try writer.write { batch in for i in 0..<10 { batch[Self.auto(i)] = i } }
            _ = try await Replicator(store: writer, peers: [.store(relay)]).sync()
            let spy = Spy(StoreTransport(store: relay))
            let peer = Peer(name: "relay", transport: spy)
            let pulled = try await Replicator(store: device, peers: [peer]).sync()
            #expect(pulled.sent == 0)
            var configuration = Replicator.Configuration()
            configuration.pullInterval = .milliseconds(100)
            let automatic = Replicator(store: device, peers: [peer], configuration: configuration)
            await automatic.start()
            try await Task.sleep(for: .seconds(2))
            await automatic.stop()
            let echoed = spy.pushed.withLock { $0.count }
            #expect(echoed == 0, "automatic mode pushed \(echoed) events back to the relay they came from")
        }
    }

    // MARK: Held: compaction between the pull and the push

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
}
