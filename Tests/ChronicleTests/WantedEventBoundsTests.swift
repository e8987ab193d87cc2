@_spi(Wire) @testable import Chronicle
@testable import ChronicleLog
@_spi(Wire) import ChronicleFormat
import ChronicleLMDB
import ChronicleSodium
import ChronicleTesting
import Foundation
import Synchronization
import Testing

/// What a carrier can do to the list of events a member lost and asks for again (`want/`,
/// docs/FORMAT.md 7.6).
struct WantedEventBoundsTests {
    func withGroup(_ body: (_ victim: Store, _ honest: Store, _ spare: URL) async throws -> Void) async throws {
        try await HostilePeerTests().withGroup(body)
    }

    func junkWaitingEvents(_ count: Int, like model: Event) -> [Event] {
        (0..<count).map { _ in
            var event = model
            event.origin = ReplicaID.random()
            event.payload = Sodium.randomBytes(32)
            event.authenticator?.keyID = .random()  // a key nobody holds: "waiting for its key"
            return event
        }
    }

    func importJunk(_ count: Int, into victim: Store, like source: Store? = nil) throws {
        let model = try #require(try EventRange(decoding: Array(try (source ?? victim).exportRange(after: 0))).events.first { $0.authenticator != nil })
        var left = count
        while left > 0 {
            let batch = junkWaitingEvents(min(left, 8_192), like: model)
            left -= batch.count
            _ = try victim.importRange(
                Data(EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [], events: batch, opaque: []).encoded()),
                from: "a carrier")
        }
    }

    /// A request naming one identity 1,024 times is answered as if it named it once (FORMAT.md
    /// 7.6: a repeated identity counts once), so repeating costs the answerer nothing.
    @Test func aRepeatedIdentityIsAnsweredOnce() throws {
        try withTemporaryStore { store, _ in
            try store.set("once", for: Key<String>("wanted.once", default: "", sync: .manual))
            let event = try #require(try EventRange(decoding: Array(try store.exportRange(after: 0))).events.first)
            let identity = EventIdentity(writer: event.origin, counter: event.counter)
            let once = try EventRange(decoding: Array(try store.exportEvents([identity])))
            let repeated = try EventRange(decoding: Array(try store.exportEvents(Array(repeating: identity, count: EventIdentity.maxPerRequest))))
            #expect(once.events.count == 1)
            #expect(repeated.events.count == 1, "\(repeated.events.count) copies of one identity")
            // Repeats do not take the place of other identities either.
            let other = EventIdentity(writer: .random(), counter: 1)
            #expect(EventIdentity.distinct(Array(repeating: other, count: 2_000) + [identity]) == [other, identity])
        }
    }

    /// The genuine event is lost (evicted by a first flood) and recorded as wanted; a second
    /// flood of the same cheap junk (~17,000 more small events naming keys nobody holds) pushes
    /// `want/` past its 16,384 entries, and the entries lost longest ago (the genuine one) are
    /// the ones dropped. The junk entries never leave: their keys never arrive.
    @Test func junkThatFloodsTheWantedListDoesNotLoseAGenuineEvent() async throws {
        try await withGroup { victim, _, spare in
            let newcomer = try Store(directory: spare, configuration: passphraseConfiguration("the group"))
            try newcomer.set("from the newcomer", for: .groupTheme)
            let relay = LossyRelayTransport(base: StoreTransport(store: newcomer))
            relay.strips.withLock { $0 = true }
            try await Replicator(store: victim, peers: [Peer(name: "relay", transport: relay)]).sync()
            try importJunk(Quarantine.quarantineCapacity, into: victim)
            #expect(try WantedEvents.count(in: victim.eventLog.storage) >= 1, "the genuine event was not recorded as wanted")
            try importJunk(WantedEvents.capacity + 2_000, into: victim)
            // The key arrives with the newcomer's next write; the sync asks for what was lost.
            relay.strips.withLock { $0 = false }
            try newcomer.set("also from the newcomer", for: .groupToken)
            try await Replicator(store: victim, peers: [Peer(name: "relay", transport: relay)]).sync()
            #expect(try victim.value(for: .groupToken) == "also from the newcomer")
            #expect(victim[.groupTheme] == "from the newcomer", "the genuine event was dropped from want/ by junk and is lost for good")
        }
    }

    /// The same flood through the peer the genuine event came from (a relay, or the hub, that
    /// holds the carrier's junk after it): the overflow happens in the middle of a pull, whose
    /// own checkpoint would move past the genuine event again in the same transaction. The
    /// member marks its pull checkpoints instead, and its next sync pulls that peer from the
    /// start.
    @Test func aFloodThroughThePeerItselfDoesNotLoseAGenuineEvent() async throws {
        try await withGroup { victim, _, spare in
            let relayDirectory = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: relayDirectory) }
            var relayConfiguration = Store.Configuration()
            relayConfiguration.travelKeyCost = .minimumForTesting
            relayConfiguration.retention = .forever  // a relay keeps what it relays (`chronicle serve`'s default)
            let relayStore = try Store(directory: relayDirectory, configuration: relayConfiguration)
            let newcomer = try Store(directory: spare, configuration: passphraseConfiguration("the group"))
            try newcomer.set("from the newcomer", for: .groupTheme)
            try await Replicator(store: newcomer, peers: [.store(relayStore)]).sync()
            try importJunk(Quarantine.quarantineCapacity + WantedEvents.capacity + 2_000, into: relayStore, like: victim)
            let relay = LossyRelayTransport(base: StoreTransport(store: relayStore))
            relay.strips.withLock { $0 = true }
            try await Replicator(store: victim, peers: [Peer(name: "relay", transport: relay)]).sync()
            #expect(victim[.groupTheme] != "from the newcomer")
            // The key reaches the relay with the newcomer's next write; the next sync starts over.
            relay.strips.withLock { $0 = false }
            try newcomer.set("also from the newcomer", for: .groupToken)
            try await Replicator(store: newcomer, peers: [.store(relayStore)]).sync()
            try await Replicator(store: victim, peers: [Peer(name: "relay", transport: relay)]).sync()
            #expect(try victim.value(for: .groupToken) == "also from the newcomer")
            #expect(victim[.groupTheme] == "from the newcomer", "a flood through the peer itself lost the genuine event for good")
        }
    }

    /// A carrier that predicts a member's next identity (writer ids are public, counters count
    /// up) pushes a forged event under it to a keyless relay before the member's push arrives:
    /// the relay's log holds the forgery as that identity's first version and keeps the genuine
    /// one to relay. A victim that lost the genuine event asks the relay by identity, gets the
    /// forgery only (a store answers the first version), and forgets the identity "answered",
    /// though the relay holds the genuine event.
    @Test func aForgedFirstVersionAtARelayDoesNotMakeAMemberForgetALostEvent() async throws {
        try await withGroup { victim, _, spare in
            let relayDirectory = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: relayDirectory) }
            var relayConfiguration = Store.Configuration()
            relayConfiguration.travelKeyCost = .minimumForTesting
            let relay = try Store(directory: relayDirectory, configuration: relayConfiguration)
            let newcomer = try Store(directory: spare, configuration: passphraseConfiguration("the group"))
            try newcomer.set("first", for: .groupToken)
            try await Replicator(store: newcomer, peers: [.store(relay)]).sync()
            // The carrier reads the relay and forges the newcomer's next identity.
            let seen = try EventRange(decoding: Array(try relay.exportRange(after: 0)))
            let writer = try #require(try newcomer.replicaInfo().writer)
            let last = try #require(seen.events.last { $0.origin == writer })
            var forged = last
            forged.counter += 1
            forged.payload = Sodium.randomBytes(48)
            _ = try relay.importRange(
                Data(EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [], events: [forged], opaque: []).encoded()),
                from: "HTTP push")
            // The member writes the predicted identity and pushes it.
            try newcomer.set("from the newcomer", for: .groupTheme)
            let genuine = try #require(try newcomer.logEntries().last { $0.key == Keys.groupTheme.name })
            #expect(genuine.counter == forged.counter, "the prediction missed")
            try await Replicator(store: newcomer, peers: [.store(relay)]).sync()
            // The victim pulls there without the newcomer's key record, then junk evicts what waits.
            let transport = LossyRelayTransport(base: StoreTransport(store: relay))
            transport.strips.withLock { $0 = true }
            try await Replicator(store: victim, peers: [Peer(name: "relay", transport: transport)]).sync()
            try importJunk(Quarantine.quarantineCapacity, into: victim)
            #expect(try WantedEvents.count(in: victim.eventLog.storage) >= 1)
            // The key arrives; the victim asks the relay for what it lost.
            transport.strips.withLock { $0 = false }
            try newcomer.set("later", for: .groupToken)
            try await Replicator(store: newcomer, peers: [.store(relay)]).sync()
            for _ in 0..<3 { try await Replicator(store: victim, peers: [Peer(name: "relay", transport: transport)]).sync() }
            #expect(try victim.value(for: .groupToken) == "later")
            #expect(victim[.groupTheme] == "from the newcomer", "the forged first version made the victim forget the genuine event the relay holds")
        }
    }

    /// A sync whose request for lost events fails (a 503, a timeout, an answer that does not
    /// decode) still pushes: the request is an extra, not a reason to keep a member's writes
    /// from its peer. And sixteen such failures must not spend the identity.
    @Test func aFailedRequestForLostEventsDoesNotStopThePush() async throws {
        try await withGroup { victim, honest, _ in
            let keyID = try #require(try victim.eventLog.keyRecords.activeAndChainKeyIDs().active)
            let lost = EventIdentity(writer: .random(), counter: 7)
            try victim.eventLog.environment.write { txn in try WantedEvents.record([(lost, keyID)], now: UnixMilliseconds.now(), txn, victim.eventLog.dbs) }
            let peer = LossyRelayTransport(base: StoreTransport(store: honest))
            peer.failsAsking.withLock { $0 = true }
            try victim.set("pushed despite it", for: .groupTheme)
            _ = try? await Replicator(store: victim, peers: [Peer(name: "honest", transport: peer)]).sync()
            #expect(honest[.groupTheme] == "pushed despite it", "the failed request for lost events kept the victim's write from its peer")
            for _ in 0..<20 { _ = try? await Replicator(store: victim, peers: [Peer(name: "honest", transport: peer)]).sync() }
            #expect(try WantedEvents.count(in: victim.eventLog.storage) == 1, "failed requests spent the lost identity's asks")
        }
    }

    /// A peer that cannot ask by identity (an older server answers 404: `nil`) does not spend
    /// the member's asks: once a peer that can ask is reached, the identity is still wanted.
    @Test func asksAreNotSpentOnAPeerThatCannotAsk() async throws {
        try await withGroup { victim, honest, _ in
            let keyID = try #require(try victim.eventLog.keyRecords.activeAndChainKeyIDs().active)
            let lost = EventIdentity(writer: .random(), counter: 7)
            try victim.eventLog.environment.write { txn in try WantedEvents.record([(lost, keyID)], now: UnixMilliseconds.now(), txn, victim.eventLog.dbs) }
            let old = LossyRelayTransport(base: StoreTransport(store: honest))
            old.cannotAsk.withLock { $0 = true }
            for _ in 0..<Int(WantedEvents.maxAsks) { try await Replicator(store: victim, peers: [Peer(name: "old server", transport: old)]).sync() }
            #expect(try WantedEvents.count(in: victim.eventLog.storage) == 1, "\(WantedEvents.maxAsks) syncs with a server that cannot answer forgot the lost identity")
        }
    }

    /// A relay holding two lost identities of 600 KB each answers one of them and runs out of
    /// room for the other. The member counted "answered without it" for both, so after 16 such
    /// answers it forgot an identity the relay never had room to answer (a token holder's body
    /// of 1 MiB under another identity the member asks for does this on purpose). An answer
    /// now says what it had room for (FORMAT.md 7.6), and only those answers count.
    @Test func anAnswerWithoutRoomForAnIdentityDoesNotSpendItsAsks() async throws {
        try await withGroup { victim, _, _ in
            let relayDirectory = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: relayDirectory) }
            var relayConfiguration = Store.Configuration()
            relayConfiguration.travelKeyCost = .minimumForTesting
            relayConfiguration.retention = .forever
            let relay = try Store(directory: relayDirectory, configuration: relayConfiguration)
            let keyID = try #require(try victim.eventLog.keyRecords.activeAndChainKeyIDs().active)
            let model = try #require(try EventRange(decoding: Array(try victim.exportRange(after: 0))).events.first { $0.authenticator?.keyID == keyID })
            let large = (0..<2).map { _ in
                var event = model
                event.origin = ReplicaID.random()
                event.counter = 1
                event.payload = Sodium.randomBytes(600_000)
                return event
            }
            _ = try relay.importRange(
                Data(EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [], events: large, opaque: []).encoded()),
                from: "a carrier")
            let identities = large.map { EventIdentity(writer: $0.origin, counter: $0.counter) }
            let answer = try relay.answerEvents(identities)
            #expect(answer.answeredWhole == [true, false], "the relay had room for one of two 600 KB events: \(String(describing: answer.answeredWhole))")
            try victim.eventLog.environment.write { txn in
                try WantedEvents.record(identities.map { ($0, keyID) }, now: UnixMilliseconds.now(), txn, victim.eventLog.dbs)
            }
            for _ in 0..<(Int(WantedEvents.maxAsks) + 4) { try await Replicator(store: victim, peers: [.store(relay)]).sync() }
            #expect(try WantedEvents.count(in: victim.eventLog.storage) == 1, "answers without room for an identity spent its asks")
        }
    }

    /// A mailbox keeps the few smallest versions of each identity asked for and the answer's
    /// budget while it reads its files, not every version of every file: whoever can write the
    /// folder cannot set a member's memory use. The identity it set versions of aside is not
    /// answered whole.
    @Test func aMailboxAnswerKeepsAFewVersionsPerIdentityInBoundedMemory() throws {
        let model = try withTemporaryStore { store, _ in
            try store.set("a value", for: Key<String>("mailbox.model", default: "", sync: .manual))
            return try #require(try EventRange(decoding: Array(try store.exportRange(after: 0))).events.first)
        }
        let identity = EventIdentity(writer: model.origin, counter: model.counter)
        let other = EventIdentity(writer: .random(), counter: 1)
        var answer = MailboxAnswer(asking: [identity, other, identity])
        for file in 0..<40 {
            var event = model
            event.payload = Sodium.randomBytes(60_000 + 1_000 * (file % 7) + file)
            answer.consider(EventRange(source: .random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [], events: [event], opaque: []))
            #expect(answer.candidateBytes <= MailboxAnswer.maxBytes, "file \(file): \(answer.candidateBytes) bytes held")
        }
        let (events, _, whole) = answer.answer()
        #expect(events.count == MailboxAnswer.versionsPerIdentity, "\(events.count) versions of one identity")
        #expect(events.map(\.payload.count) == events.map(\.payload.count).sorted())
        #expect(events.first?.payload.count == 60_000, "the smallest version was not kept")
        #expect(whole == [false, true])
    }

    /// Through the folder itself: whoever can write it stores 40 versions of one identity, one
    /// file each. The mailbox's answer by identity carries the 4 smallest and says it was not
    /// whole (it held every version of every file in memory, and answered them all).
    @Test func aMailboxAnswersAFewVersionsOfAnIdentityItsFilesHoldMany() async throws {
        let folder = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let model = try withTemporaryStore { store, _ in
            try store.set("a value", for: Key<String>("mailbox.versions", default: "", sync: .manual))
            return try #require(try EventRange(decoding: Array(try store.exportRange(after: 0))).events.first)
        }
        let mailbox = DirectoryTransport(directory: folder)
        for file in 0..<40 {
            var version = model
            version.payload = Sodium.randomBytes(1_000 + 37 * ((file * 7) % 40))
            _ = try await mailbox.push(
                Data(EventRange(source: .random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [], events: [version], opaque: []).encoded()))
        }
        let identity = EventIdentity(writer: model.origin, counter: model.counter)
        let answer = try #require(try await mailbox.answerEvents([identity]))
        let sizes = try EventRange(decoding: Array(answer.range)).events.map(\.payload.count)
        #expect(sizes == [1_000, 1_037, 1_074, 1_111], "\(sizes.count) versions: \(sizes.prefix(6))")
        #expect(answer.answeredWhole == [false])
    }

    /// A mailbox answers "up to about 1 MiB of payload", but the key records of the files it
    /// answers from are not counted: one file of one event and 12,000 junk records under the
    /// key it names makes the answer 1.5 MB of records (and the dedup is quadratic in them:
    /// two files of 33,000 make an answer over 65,536 items that the member cannot decode,
    /// failing every sync with that mailbox).
    @Test func aMailboxAnswerStaysNearItsBound() async throws {
        try await withGroup { victim, _, _ in
            let folder = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: folder) }
            let model = try #require(try EventRange(decoding: Array(try victim.exportRange(after: 0))).events.first { $0.authenticator != nil })
            let keyID = try #require(model.authenticator?.keyID)
            let keys = (0..<12_000).map { _ in
                WrappedKey(
                    id: keyID, kind: .passphrase, salt: Sodium.randomBytes(PasswordHash.saltBytes), limits: KeyDerivationCost.minimumForTesting.limits,
                    created: 0, nonce: Sodium.randomBytes(AEAD.nonceBytes), sealedKey: Sodium.randomBytes(48))
            }
            _ = try await DirectoryTransport(directory: folder).push(
                Data(EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: keys, events: [model], opaque: []).encoded()))
            let clock = ContinuousClock()
            let start = clock.now
            let answer = try #require(try await DirectoryTransport(directory: folder).pullEvents([EventIdentity(writer: model.origin, counter: model.counter)]))
            let took = clock.now - start
            #expect(answer.count < 1_100_000 + model.payload.count, "an answer of \(answer.count) bytes (\(took)) for one small event")
        }
    }
}
