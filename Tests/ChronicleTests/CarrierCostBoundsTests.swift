@_spi(Wire) @testable import Chronicle
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleSodium
import ChronicleTesting
import Foundation
import Synchronization
import Testing

/// What a carrier without the group's key can cost a member (Argon2id runs, disk, the
/// quarantine), bounded the way the trust model says, without a genuine event or key ever
/// refused because of what else a batch carries.
struct CarrierCostBoundsTests {
    func withGroup(_ body: (_ victim: Store, _ honest: Store, _ spare: URL) async throws -> Void) async throws {
        try await HostilePeerTests().withGroup(body)
    }

    /// A passphrase key record no passphrase opens, at the members' (test) travel cost.
    func junkKeyRecord(id: KeyID = .random(), like model: WrappedKey? = nil) -> WrappedKey {
        WrappedKey(
            id: id, kind: .passphrase, salt: Sodium.randomBytes(PasswordHash.saltBytes),
            limits: model?.limits ?? KeyDerivationCost.minimumForTesting.limits, created: model?.created ?? 0,
            nonce: Sodium.randomBytes(AEAD.nonceBytes), sealedKey: Sodium.randomBytes(48))
    }

    func derivations(_ store: Store) throws -> Int { try store.crypto.get().keks.derivations }

    /// A third member joins (its own data key, wrapped under its own salt) and writes once.
    func newcomersRange(_ directory: URL) throws -> (range: EventRange, store: Store) {
        let newcomer = try Store(directory: directory, configuration: passphraseConfiguration("the group"))
        try newcomer.set("from the newcomer", for: .groupTheme)
        return (try EventRange(decoding: Array(try newcomer.exportRange(after: 0))), newcomer)
    }

    // MARK: - Key derivations

    /// Junk key records under ids no event names cost nothing: only the newcomer's key is derived.
    @Test func junkKeyRecordsAheadOfANewMembersKeyDoNotStarveIt() async throws {
        try await withGroup { victim, _, spare in
            var (range, _) = try newcomersRange(spare)
            range.keys = (0..<8).map { _ in junkKeyRecord() } + range.keys
            let before = try derivations(victim)
            _ = try victim.importRange(Data(range.encoded()), from: "a file")
            #expect(victim[.groupTheme] == "from the newcomer", "the new member's key was refused")
            #expect(try derivations(victim) - before == 1)
            #expect(try victim.quarantinedItems().isEmpty, "records no event names are ignored, not kept")
        }
    }

    /// Key ids are public, so junk can sit under the genuine id, where only a derivation tells them
    /// apart. Each junk record costs one derivation ever; the genuine one waits (never refused) and
    /// opens within the next imports, and re-sending the junk costs nothing.
    @Test func junkUnderTheGenuineKeyIDDelaysButNeverRefusesIt() async throws {
        try await withGroup { victim, _, spare in
            var (range, _) = try newcomersRange(spare)
            let genuine = try #require(range.keys.first { key in range.events.contains { $0.authenticator?.keyID == key.id } })
            let junk = (0..<6).map { _ in junkKeyRecord(id: genuine.id, like: genuine) }
            range.keys = junk + range.keys
            let before = try derivations(victim)
            let receipt = try victim.importRange(Data(range.encoded()), from: "a file")
            #expect(receipt.quarantined > 0, "nothing waited: the batch ran more than its budget")
            // The retry the import started tries the waiting records (two junk, one genuine) apart;
            // junk under an id that opened is not derived at all.
            victim.waitForKeyRecordRetries()
            #expect(victim[.groupTheme] == "from the newcomer", "the genuine key never opened")
            let spent = try derivations(victim) - before
            #expect((5...7).contains(spent), "\(spent) derivations")
            #expect(try !victim.quarantinedItems().contains { $0.reason == .derivationBudget || $0.kind == .event })
            _ = try victim.importRange(Data(range.encoded()), from: "a file")
            victim.waitForKeyRecordRetries()
            #expect(try derivations(victim) - before == spent, "junk sent again was derived again")
            #expect(try victim.verify().isSound)
        }
    }

    /// Junk under the genuine id ahead of it, sent again to every sync of a member that runs
    /// each sync in a new process (`chronicle sync`, a relaunched app): what a derivation showed
    /// not to open is remembered on disk, so each junk record costs one derivation ever and the
    /// genuine key opens within three imports. Before, every process derived the same junk again
    /// and the genuine key never opened.
    @Test func aRecordThatDidNotOpenIsNotDerivedAgainByAnotherProcess() async throws {
        try await withGroup { victim, _, spare in
            var (range, _) = try newcomersRange(spare)
            let genuine = try #require(range.keys.first { key in range.events.contains { $0.authenticator?.keyID == key.id } })
            range.keys = (0..<8).map { _ in junkKeyRecord(id: genuine.id, like: genuine) } + range.keys
            var spent = 0
            for _ in 0..<3 {
                let process = try Store(directory: victim.directory, configuration: passphraseConfiguration("the group"))
                let opened = try derivations(process)
                _ = try process.importRange(Data(range.encoded()), from: "a relay")
                spent += try derivations(process) - opened
            }
            #expect(victim[.groupTheme] == "from the newcomer", "the genuine key never opened")
            #expect(spent <= 9 + 2, "\(spent) derivations: junk was derived again")
            // A new passphrase tries every record again: what did not open under the old one may now.
            let tagKey = try #require(try victim.crypto.get().unopenedTagKey(needed: true))
            #expect(try victim.eventLog.keyRecords.unopened(range.keys.map { Keyring.unopenedTag($0, key: tagKey) }).count == 8)
            try victim.changePassphrase(to: "a new one")
            let newTagKey = try #require(try victim.crypto.get().unopenedTagKey(needed: true))
            #expect(try victim.eventLog.keyRecords.unopened(range.keys.map { Keyring.unopenedTag($0, key: newTagKey) }).isEmpty)
        }
    }

    /// Whatever peers send, a member runs at most its ceiling of derivations a minute for the
    /// records they bring; the rest wait (reason 8) for later imports, never refused.
    @Test func derivationsForReceivedRecordsStayUnderTheMembersCeiling() async throws {
        try await withGroup { victim, _, _ in
            var configuration = passphraseConfiguration("the group")
            configuration.maxReceivedKeyDerivationsPerMinute = 3
            let member = try Store(directory: victim.directory, configuration: configuration)
            let model = try #require(try EventRange(decoding: Array(try victim.exportRange(after: 0))).events.first { $0.authenticator != nil })
            let opened = try derivations(member)
            for _ in 0..<3 {
                let keys = (0..<4).map { _ in junkKeyRecord() }
                let events = keys.map { key in
                    var event = model
                    event.origin = ReplicaID.random()
                    event.authenticator?.keyID = key.id
                    return event
                }
                _ = try member.importRange(Data(EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: keys, events: events, opaque: []).encoded()), from: "a carrier")
            }
            member.waitForKeyRecordRetries()
            #expect(try derivations(member) - opened == 3)
            #expect(try member.quarantinedItems().filter { $0.reason == .derivationBudget }.count >= 9)
        }
    }

    // MARK: - The quarantine

    /// Forged events a member sets aside (junk: their authenticators do not verify).
    func junkEvents(_ count: Int, like model: Event) -> [Event] {
        (0..<count).map { _ in
            var event = model
            event.origin = ReplicaID.random()
            event.payload = Sodium.randomBytes(32)
            return event
        }
    }

    /// A full quarantine of junk still takes an event waiting for its key, whole (over 64 KiB
    /// too), and releases it when the key arrives: junk is evicted first.
    @Test func aQuarantineFullOfJunkStillKeepsAndReleasesWaitingEvents() async throws {
        try await withGroup { victim, _, spare in
            let model = try #require(try EventRange(decoding: Array(try victim.exportRange(after: 0))).events.first)
            var junk = junkEvents(Quarantine.quarantineCapacity, like: model)
            while !junk.isEmpty {
                let batch = Array(junk.prefix(4_096))
                junk.removeFirst(batch.count)
                _ = try victim.importRange(Data(EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [], events: batch, opaque: []).encoded()), from: "a carrier")
            }
            #expect(try victim.eventLog.quarantine.quarantineCount() == Quarantine.quarantineCapacity)
            // A new member writes a value over 64 KiB; its events arrive before its key does.
            let newcomer = try Store(directory: spare, configuration: passphraseConfiguration("the group"))
            let big = String(repeating: "x", count: 100 << 10)
            try newcomer.set(big, for: .groupTheme)
            var range = try EventRange(decoding: Array(try newcomer.exportRange(after: 0)))
            let keys = range.keys
            range.keys = []
            let receipt = try victim.importRange(Data(range.encoded()), from: "a relay that lost the key")
            #expect(receipt.quarantined == range.events.count)
            #expect(try victim.quarantinedItems().filter { $0.reason == .awaitingKey }.count == range.events.count)
            #expect(try victim.eventLog.quarantine.quarantineCount() <= Quarantine.quarantineCapacity)
            // The key arrives (with another event of the newcomer's), and the waiting event applies whole.
            try newcomer.set("after", for: .groupToken)
            var later = try EventRange(decoding: Array(try newcomer.exportRange(after: range.upTo)))
            later.keys = keys
            _ = try victim.importRange(Data(later.encoded()), from: "a member")
            #expect(victim[.groupTheme] == big)
            #expect(try victim.value(for: .groupToken) == "after")
            #expect(try victim.verify().isSound)
        }
    }

    /// A genuine event waiting for its key, then 10,000 junk events naming keys nobody holds:
    /// the junk evicts the genuine event, and the checkpoint has moved past it. The member
    /// remembers what it lost and, once the key arrives, asks its peer for it by identity. The
    /// receipt counts what the quarantine holds, not what it took and evicted again.
    @Test func aGenuineEventEvictedByJunkComesBackWhenItsKeyArrives() async throws {
        try await withGroup { victim, _, spare in
            let newcomer = try Store(directory: spare, configuration: passphraseConfiguration("the group"))
            try newcomer.set("from the newcomer", for: .groupTheme)
            let relay = LossyRelayTransport(base: StoreTransport(store: newcomer))
            relay.strips.withLock { $0 = true }
            try await Replicator(store: victim, peers: [Peer(name: "relay", transport: relay)]).sync()
            let writer = try #require(try newcomer.replicaInfo().writer)
            #expect(try victim.quarantinedItems().filter { $0.reason == .awaitingKey && $0.origin == writer }.count == 1)
            // The flood, in one range: events naming random key ids, each "waiting for its key".
            let model = try #require(try EventRange(decoding: Array(try victim.exportRange(after: 0))).events.first { $0.authenticator != nil })
            var junk = junkEvents(Quarantine.quarantineCapacity, like: model)
            for index in junk.indices { junk[index].authenticator?.keyID = .random() }
            let receipt = try victim.importRange(Data(EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [], events: junk, opaque: []).encoded()), from: "a carrier")
            #expect(try !victim.quarantinedItems().contains { $0.origin == writer }, "the flood did not evict the genuine event")
            #expect(try receipt.quarantined == victim.eventLog.quarantine.quarantineCount(), "the receipt counted \(receipt.quarantined)")
            #expect(try WantedEvents.count(in: victim.eventLog.storage) >= 1)
            // The key arrives with the newcomer's next write; the sync asks for what was lost.
            relay.strips.withLock { $0 = false }
            try newcomer.set("also from the newcomer", for: .groupToken)
            try await Replicator(store: victim, peers: [Peer(name: "relay", transport: relay)]).sync()
            #expect(try victim.value(for: .groupToken) == "also from the newcomer")
            #expect(victim[.groupTheme] == "from the newcomer", "the evicted genuine event never came back")
            #expect(try victim.verify().isSound)
        }
    }

    /// A waiting event larger than the quarantine keeps whole is not kept, and not lost: it is
    /// asked for again once its key is here.
    @Test func aWaitingEventTooLargeToKeepComesBackWhenItsKeyArrives() async throws {
        try await withGroup { victim, _, spare in
            let newcomer = try Store(directory: spare, configuration: passphraseConfiguration("the group"))
            let large = String(repeating: "z", count: Quarantine.waitingItemLimit + 1)
            try newcomer.set(large, for: .groupTheme)
            let relay = LossyRelayTransport(base: StoreTransport(store: newcomer))
            relay.strips.withLock { $0 = true }
            try await Replicator(store: victim, peers: [Peer(name: "relay", transport: relay)]).sync()
            #expect(try victim.quarantinedItems().isEmpty)
            #expect(try WantedEvents.count(in: victim.eventLog.storage) == 1)
            relay.strips.withLock { $0 = false }
            try newcomer.set("also from the newcomer", for: .groupToken)
            try await Replicator(store: victim, peers: [Peer(name: "relay", transport: relay)]).sync()
            #expect(victim[.groupTheme] == large)
            #expect(try WantedEvents.count(in: victim.eventLog.storage) == 0)
        }
    }

    /// Four files of 1,000 "newer-format" items of 60 KB each from a stranger: a member keeps
    /// none of them to relay, and its quarantine keeps what lists them within its 16 MiB, so
    /// the store grows by a small fraction of what was sent (the quarantine kept 128 MiB of
    /// them, and `data.mdb` reached 262 MB).
    @Test func aStrangersJunkCostsAMemberABoundedShareOfDisk() async throws {
        try await withGroup { victim, _, _ in
            for file in 0..<4 {
                let items = (0..<1_000).map { _ -> OpaqueEvent in
                    let origin = ReplicaID.random()
                    let bytes = [UInt8(3)] + origin.bytes + UInt64(1).bigEndianBytes + Sodium.randomBytes(60_000)
                    return OpaqueEvent(origin: origin, counter: 1, bytes: bytes, reason: "")
                }
                let range = EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [], events: [], opaque: items)
                _ = try victim.importRange(Data(range.encoded()), from: "file junk-\(file).range")
            }
            let items = try victim.quarantinedItems()
            #expect(items.count > 3_000 && items.count <= 4_000)
            #expect(items.allSatisfy { $0.origin != nil }, "an item the quarantine keeps still lists its identity")
            let stored = try victim.eventLog.environment.read { txn in try victim.eventLog.quarantine.quarantineSpace(txn) }
            #expect(stored.bytes <= Quarantine.quarantineByteCapacity)
            let size = try #require(try FileManager.default.attributesOfItem(atPath: victim.directory.appendingPathComponent("data.mdb").path)[.size] as? NSNumber).intValue
            #expect(size < 48 << 20, "data.mdb is \(size) bytes after 240 MB of junk")
        }
    }

    /// A received value larger than the store's `maxValueSize` is quarantined, never applied,
    /// and the rest of its batch applies.
    @Test func aReceivedValueOverTheSizeLimitIsQuarantined() async throws {
        let directories = (0..<2).map { _ in temporaryDirectory() }
        defer { for directory in directories { try? FileManager.default.removeItem(at: directory) } }
        var small = passphraseConfiguration("the group")
        small.maxValueSize = 1 << 10
        let sender = try Store(directory: directories[0], configuration: passphraseConfiguration("the group"))
        let receiver = try Store(directory: directories[1], configuration: small)
        try sender.set(String(repeating: "x", count: 4 << 10), for: .groupTheme)
        try sender.set("fits", for: .groupToken)
        let receipt = try receiver.importRange(try sender.exportRange(after: 0), from: "a member")
        #expect(receipt.applied == 1 && receipt.quarantined == 1)
        #expect(receiver[.groupTheme] == "system")
        #expect(try receiver.value(for: .groupToken) == "fits")
        #expect(try receiver.quarantinedItems().map(\.reason) == [.tooLarge])
    }

    // MARK: - Newer-format items

    /// Items of a "newer format" cost a carrier nothing to make. A member keeps none it cannot
    /// authenticate, so four big files of them grow it by nothing and it relays none of them.
    @Test func aMemberKeepsNoUnauthenticatedNewerFormatItems() async throws {
        try await withGroup { victim, honest, _ in
            let before = try victim.statistics()
            for _ in 0..<4 {
                let items = (0..<64).map { _ -> OpaqueEvent in
                    let origin = ReplicaID.random()
                    let bytes = [UInt8(3)] + origin.bytes + UInt64(1).bigEndianBytes + Sodium.randomBytes(64 << 10)
                    return OpaqueEvent(origin: origin, counter: 1, bytes: bytes, reason: "")
                }
                let range = EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [], events: [], opaque: items)
                let receipt = try victim.importRange(Data(range.encoded()), from: "a carrier")
                #expect(receipt.opaque == 0 && receipt.quarantined == 64)
            }
            let after = try victim.statistics()
            #expect(after.records == before.records && after.relayOnly == 0)
            #expect(after.quarantined <= Quarantine.quarantineCapacity)
            // Nothing of it travels on.
            try await Replicator(store: honest, peers: [.store(victim)]).sync()
            #expect(try honest.statistics().relayOnly == 0)
        }
    }

    /// A store without the group's key (a relay) cannot tell a genuine newer-format item from junk:
    /// it keeps them up to a bound, a quarter of it per source, counts them in `stats`, and
    /// `compact(dropRelayOnly:)` drops them.
    @Test func aRelayKeepsNewerFormatItemsUpToItsBound() throws {
        try withTemporaryStore { relay, _ in
            var receipt = RangeReceipt()
            func send(_ count: Int, from source: String) throws {
                let items = (0..<count).map { _ -> OpaqueEvent in
                    let origin = ReplicaID.random()
                    return OpaqueEvent(origin: origin, counter: 1, bytes: [UInt8(3)] + origin.bytes + UInt64(1).bigEndianBytes + [0xAA], reason: "")
                }
                let range = EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [], events: [], opaque: items)
                receipt.add(try relay.importRange(Data(range.encoded()), from: source))
            }
            try send(RelayOnlyBounds.relayOnlyPerSource + 100, from: "carrier 0")  // 100 past its share
            for source in 1..<4 { try send(RelayOnlyBounds.relayOnlyPerSource, from: "carrier \(source)") }
            try send(100, from: "carrier 4")  // past the total
            #expect(receipt.opaque == RelayOnlyBounds.relayOnlyCapacity)
            #expect(receipt.quarantined == 200)
            #expect(try relay.quarantinedItems().allSatisfy { $0.reason == .relayLimit })
            let stats = try relay.statistics()
            #expect(stats.relayOnly == RelayOnlyBounds.relayOnlyCapacity && stats.relayOnlyBytes > 0)
            #expect(stats.relayOnlyBySource["carrier 0"] == RelayOnlyBounds.relayOnlyPerSource && stats.relayOnlyBySource["carrier 4"] == nil)
            let report = try relay.compact(dropRelayOnly: true)
            #expect(report.relayOnlyDropped == RelayOnlyBounds.relayOnlyCapacity)
            #expect(try relay.statistics().relayOnly == 0 && relay.statistics().relayOnlyBySource.isEmpty)
            #expect(try relay.verify().isSound)
        }
    }

    /// A copy of a relay (`chronicle replay --into`) keeps every relay-only record it holds: the
    /// bound per source is for what strangers send, and a copy came from one source ("a copy of
    /// PATH"), so it kept 16,384 and quarantined the rest.
    @Test func aCopyOfARelayKeepsEveryRelayOnlyRecord() throws {
        try withTemporaryStore { relay, _ in
            for source in 0..<2 {
                let items = (0..<(RelayOnlyBounds.relayOnlyPerSource - 1)).map { _ -> OpaqueEvent in
                    let origin = ReplicaID.random()
                    return OpaqueEvent(origin: origin, counter: 1, bytes: [UInt8(3)] + origin.bytes + UInt64(1).bigEndianBytes + [0xAA], reason: "")
                }
                let range = EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [], events: [], opaque: items)
                _ = try relay.importRange(Data(range.encoded()), from: "carrier \(source)")
            }
            let held = try relay.statistics().relayOnly
            #expect(held == 2 * (RelayOnlyBounds.relayOnlyPerSource - 1))
            let directory = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let copy = try relay.copy(to: directory)
            #expect(try copy.statistics().relayOnly == held)
            #expect(try copy.quarantinedItems().isEmpty)
        }
    }

    // MARK: - Key records at a keyless relay

    /// A relay without the group's key, a member who joins after the others (its key record new
    /// to everyone), and a carrier that pushes junk records under that member's key id, each
    /// with an event naming the id (so the relay keeps it).
    func withRelayAndNewcomer(
        _ body: (_ victim: Store, _ newcomer: Store, _ relay: Store, _ squat: (Int) throws -> Void, _ real: WrappedKey) async throws -> Void
    ) async throws {
        try await withGroup { victim, _, relayDirectory in
            let newcomerDirectory = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: newcomerDirectory) }
            var relayConfiguration = Store.Configuration()
            relayConfiguration.travelKeyCost = .minimumForTesting
            let relay = try Store(directory: relayDirectory, configuration: relayConfiguration)
            let newcomer = try Store(directory: newcomerDirectory, configuration: passphraseConfiguration("the group"))
            try newcomer.set("from the newcomer", for: .groupTheme)
            let seen = try EventRange(decoding: Array(try newcomer.exportRange(after: 0)))
            let real = try #require(seen.keys.first { key in seen.events.contains { $0.authenticator?.keyID == key.id && $0.key == Keys.groupTheme.name } })
            #expect(try victim.eventLog.keyRecords.wrappedKey(real.id) == nil)
            var filler = try #require(seen.events.last { $0.authenticator?.keyID == real.id })
            func squat(_ count: Int) throws {
                let junk = (0..<count).map { _ in junkKeyRecord(id: real.id, like: real) }
                filler.origin = ReplicaID.random()
                _ = try relay.importRange(Data(EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: junk, events: [filler], opaque: []).encoded()), from: "HTTP push")
            }
            try await body(victim, newcomer, relay, squat, real)
        }
    }

    /// Key ids are public. Junk records under a member's id at a relay without the group's key,
    /// five before the real record arrives and ten after, do not make the relay drop the real one:
    /// a member pulling there opens the member's events (within a few imports: each junk record
    /// costs it one derivation, a batch runs a few).
    @Test func junkRecordsUnderAMembersKeyIDAtARelayDoNotCutItOff() async throws {
        try await withRelayAndNewcomer { victim, newcomer, relay, squat, real in
            try squat(5)
            #expect(try relay.eventLog.keyRecords.wrappedKey(real.id) != real, "the junk did not squat the id")
            try await Replicator(store: newcomer, peers: [.store(relay)]).sync()
            try squat(10)
            for _ in 0..<6 where victim[.groupTheme] != "from the newcomer" {
                try await Replicator(store: victim, peers: [.store(relay)]).sync()
                victim.waitForKeyRecordRetries()
            }
            #expect(victim[.groupTheme] == "from the newcomer", "the relay dropped the member's real key record")
        }
    }

    /// The flushing variant: one junk record under a member's key id before its first push, then
    /// sixteen fresh ones after each of its pushes. The real record is the relay's oldest
    /// alternate; a relay that let new alternates replace the oldest lost it at every push, and
    /// every member pulling there quarantined the member's events. The earliest arrivals stay.
    @Test func junkFlushedAfterEachPushAtARelayDoesNotCutAMemberOff() async throws {
        try await withRelayAndNewcomer { victim, newcomer, relay, squat, real in
            try squat(1)
            for round in 0..<6 where victim[.groupTheme] != "from the newcomer" {
                if round > 0 { try newcomer.set("from the newcomer", for: .groupTheme) }
                try await Replicator(store: newcomer, peers: [.store(relay)]).sync()
                try squat(KeyRecords.alternatesPerKey)
                try await Replicator(store: victim, peers: [.store(relay)]).sync()
            }
            #expect(victim[.groupTheme] == "from the newcomer", "the relay flushed the member's real key record")
        }
    }

    // MARK: - Sync rounds

    /// A peer that answers each pull with a range that never reaches its head, or that always
    /// starts below the position asked for. It counts the pulls it answers, and past
    /// ``EndlessPeer/hangGuard`` of them it fails the pull (so a sync that never stops ends the
    /// test with a failure instead of hanging it).
    struct EndlessPeer: SyncTransport {
        enum Mode { case creeping, rewinding }
        static let hangGuard = 100_000
        let mode: Mode
        let id = ReplicaID.random()
        let epoch = LogEpoch.random()
        let head: UInt64 = 1 << 40
        let pulls = PullCount()

        final class PullCount: Sendable {
            let value = Mutex(0)
        }

        func info() async throws -> ReplicaInfo { ReplicaInfo(replicaID: id, epoch: epoch, protocolVersion: EventRange.protocolVersion, head: head, writer: .random()) }

        func pull(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) async throws -> Data {
            let count = pulls.value.withLock { count in
                count += 1
                return count
            }
            guard count <= Self.hangGuard else { throw CancellationError() }
            let start = mode == .creeping ? after : 0
            return Data(EventRange(source: id, epoch: epoch, after: start, upTo: start + 1, head: head, keys: [], events: [], opaque: []).encoded())
        }

        func push(_ range: Data) async throws -> RangeReceipt { RangeReceipt() }
    }

    /// A hostile peer cannot keep `sync()` running: a pull that never reaches the peer's head
    /// stops after the configured number of batches, one that keeps starting over after a few
    /// restarts. Asserted as the pulls the peer answered, whatever the machine's speed.
    @Test(arguments: [EndlessPeer.Mode.creeping, .rewinding])
    func aPeerThatNeverReachesItsHeadCannotKeepASyncRunning(mode: EndlessPeer.Mode) async throws {
        try await withTemporaryStore { store, _ in
            var configuration = Replicator.Configuration()
            configuration.maxPullBatches = 200
            let peer = EndlessPeer(mode: mode)
            let replicator = Replicator(store: store, peers: [Peer(name: "endless", transport: peer)], configuration: configuration)
            await #expect(throws: ChronicleError.self) { try await replicator.sync() }
            let pulls = peer.pulls.value.withLock { $0 }
            switch mode {
            case .creeping: #expect(pulls == configuration.maxPullBatches, "\(pulls) pulls")
            case .rewinding: #expect(pulls <= 2 * (ExchangeState.maxRestarts + 1), "\(pulls) pulls")
            }
        }
    }

    // MARK: - Mailbox files

    /// What anyone who can write the shared folder leaves there costs a member nothing: a huge
    /// `mailbox.id` or a FIFO is refused at once with an error naming the file, and a `ranges/`
    /// that is a symbolic link receives no member's push.
    @Test func hostileMailboxFilesCostNothingAndRedirectNothing() async throws {
        try await withGroup { victim, _, folder in
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let id = folder.appendingPathComponent("mailbox.id")
            // A 64 MiB id file (the review's was 1.2 GB) and a FIFO: neither is read.
            try makeSparseFile(at: id, size: 64 << 20)
            let replicator = Replicator(store: victim, peers: [.directory(folder)])
            await #expect { try await replicator.sync() } throws: { "\($0)".contains("mailbox.id") }
            try FileManager.default.removeItem(at: id)
            #expect(mkfifo(id.path, 0o600) == 0)
            let fifoSync = Task { try await replicator.sync() }
            // A hang guard, not a timing: reading a FIFO would block for ever.
            #expect(await finishes(Task { _ = try? await fifoSync.value }), "a FIFO as mailbox.id stalled the sync")
            await #expect { try await fifoSync.value } throws: { "\($0)".contains("mailbox.id") }
            try FileManager.default.removeItem(at: id)
            // A symbolic link as mailbox.id, even to a well-formed id file: refused, naming the file.
            let elsewhereID = folder.appendingPathComponent("other.id")
            try Data(String(repeating: "a", count: 32).utf8).write(to: elsewhereID)
            try FileManager.default.createSymbolicLink(at: id, withDestinationURL: elsewhereID)
            await #expect { try await replicator.sync() } throws: { "\($0)".contains("mailbox.id") }
            try FileManager.default.removeItem(at: id)
            try FileManager.default.removeItem(at: elsewhereID)
            // ranges/ as a link to somewhere else: nothing is written there.
            let elsewhere = folder.appendingPathComponent("elsewhere")
            try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(at: folder.appendingPathComponent("ranges"), withDestinationURL: elsewhere)
            await #expect(throws: ChronicleError.self) { try await replicator.sync() }
            #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path).isEmpty)
            // ranges/ as a plain file: refused too.
            try FileManager.default.removeItem(at: folder.appendingPathComponent("ranges"))
            try Data("x".utf8).write(to: folder.appendingPathComponent("ranges"))
            await #expect(throws: ChronicleError.self) { try await replicator.sync() }
            // Removed, the mailbox works again.
            try FileManager.default.removeItem(at: folder.appendingPathComponent("ranges"))
            try await replicator.sync()
            #expect(try !FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent("ranges").path).isEmpty)
        }
    }

    // MARK: - Version 1 events

    /// A version-1 event as an older build wrote it (docs/FORMAT.md 3.2).
    func versionOneEvent(key: String, value: String) -> [UInt8] {
        var writer = ByteWriter(capacity: 128)
        writer.u8(1)
        writer.raw(ReplicaID.random().bytes)
        writer.u64(1)
        writer.u64(HLC.next(after: HLC(rawValue: 0), nowMilliseconds: UnixMilliseconds.now()).rawValue)
        for byte in [Domain.defaults.rawValue, ChangeOperation.set.rawValue, SyncPolicy.manual.rawValue, ValueEncoding.string.rawValue, 0] { writer.u8(byte) }
        writer.shortField(Array(key.utf8))
        writer.longField(Array(value.utf8))
        return writer.bytes
    }

    /// A member quarantines a received version-1 event (it carries no authenticator) as the bytes
    /// that were sent, so its quarantine id is found from them; a store that verifies nothing logs
    /// it as its version-2 encoding.
    @Test func aVersionOneEventIsQuarantinedAsReceivedAndLoggedAsVersionTwo() async throws {
        try await withGroup { victim, _, relayDirectory in
            let bytes = versionOneEvent(key: Keys.groupTheme.name, value: "old build")
            let range = RelayRange.encode(
                source: ReplicaID.random().bytes, epoch: LogEpoch.random().bytes, after: 0, upTo: 0, head: 0, afterChain: RelayRange.emptyChain,
                upToChain: RelayRange.emptyChain, keys: [], events: [bytes])
            _ = try victim.importRange(Data(range), from: "an old build")
            let expectedID = UInt64(bigEndianBytes: Array(GenericHash.hash([[QuarantinedItem.Kind.event.rawValue], bytes], length: 32).prefix(8)))
            #expect(try victim.quarantinedItems().map(\.id) == [expectedID])
            let relay = try Store(directory: relayDirectory)
            #expect(try relay.importRange(Data(range), from: "an old build").applied == 1)
            #expect(relay[.groupTheme] == "old build")
            let logged = try relay.eventLog.environment.read { txn in try txn.get(relay.eventLog.dbs.events, key: UInt64(1).bigEndianBytes) }
            #expect(logged.flatMap { try? LogRecord(decoding: $0, sequence: 1) }?.body.first == Event.formatVersion)
            #expect(try relay.verify().isSound)
        }
    }

    // MARK: - Key records of a newer build

    /// The first device of a newer build sends a key record of a version this build does not know:
    /// the range is not refused whole (that stalled every older device); a member cannot open the
    /// record and sets aside only the events that need it, and a relay keeps it and passes it on.
    @Test func aKeyRecordOfANewerVersionRejectsNoRange() async throws {
        try await withGroup { victim, honest, relayDirectory in
            let newerID = KeyID.random()
            let newer = [UInt8(2)] + newerID.bytes + [UInt8(9)] + Sodium.randomBytes(80)  // version 2, an unknown kind
            var event = try #require(try victimsRange(victim).events.first)
            event.origin = ReplicaID.random()
            event.authenticator?.keyID = newerID
            let bytes = RelayRange.encode(
                source: ReplicaID.random().bytes, epoch: LogEpoch.random().bytes, after: 0, upTo: 0, head: 0, afterChain: RelayRange.emptyChain,
                upToChain: RelayRange.emptyChain, keys: [newer], events: [event.encoded()])
            let receipt = try victim.importRange(Data(bytes), from: "a newer build")
            #expect(receipt.quarantined == 1 && receipt.applied == 0)
            #expect(try victim.quarantinedItems().map(\.reason) == [.awaitingKey])
            let relay = try Store(directory: relayDirectory)
            #expect(try relay.importRange(Data(bytes), from: "a newer build").applied == 1)
            let passedOn = try EventRange(decoding: Array(try relay.exportRange(after: 0)))
            #expect(passedOn.opaqueKeys == [newer])
            try await HostilePeerTests().expectUnharmed(victim, honest)
        }
    }

    func victimsRange(_ victim: Store) throws -> EventRange { try HostilePeerTests().victimsRange(victim) }
}

