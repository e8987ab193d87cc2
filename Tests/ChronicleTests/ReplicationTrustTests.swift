@testable import Chronicle
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleSodium
import ChronicleTesting
import Foundation
import Synchronization
import Testing

/// What the trust model of replication promises against a carrier without the group's key (and
/// a crash, a restore in place), each kept as a regression test: every test states the property
/// the trust model promises.
struct ReplicationTrustTests {
    /// A store without the group's key keeps a second event under an identity it holds to relay
    /// (the genuine event behind an altered copy, or a carrier's): it travels as the event it is,
    /// by the filter and the excluded writer, in automatic mode too; never when its policy is
    /// `never`, and never back to the writer whose identity it carries.
    @Test func aSecondVersionKeptToRelayTravelsByTheFilter() async throws {
        try await withTemporaryStores(2) { stores in
            let (origin, relay) = (stores[0], stores[1])
            try origin.set(1, for: Key<Int>("second.small", default: 0, sync: .automaticSmall))
            try origin.set(2, for: Key<Int>("second.manual", default: 0, sync: .manual))
            let range = try EventRange(decoding: Array(try origin.exportRange(after: 0)))
            _ = try relay.importRange(Data(range.encoded()))
            func second(of name: String, _ change: (inout Event) -> Void) throws -> Event {
                var event = try #require(range.events.first { $0.key == name })
                change(&event)
                return event
            }
            var seconds = range
            seconds.events = [
                try second(of: "second.small") { $0.payload = [9] },  // goes everywhere
                try second(of: "second.small") { $0.payload = [UInt8](repeating: 7, count: 2_000) },  // over small:1024
                try second(of: "second.manual") { $0.payload = [8] },  // manual: with sync() only
                try second(of: "second.manual") { $0.policy = .never; $0.payload = [6] },  // never leaves
            ]
            #expect(try relay.importRange(Data(seconds.encoded())).opaque == 4)
            let secondPayloads = Set(seconds.events.map(\.payload))
            func exported(_ filter: RangeFilter, excluding writer: ReplicaID? = nil) throws -> Set<[UInt8]> {
                let data = try relay.exportRange(after: 0, filter: filter, excludingOrigin: writer, maxEvents: 4_096)
                return Set(try EventRange(decoding: Array(data)).events.map(\.payload)).intersection(secondPayloads)
            }
            #expect(try exported(.automaticSmall(maxPayload: 1_024)) == [[9]])
            #expect(try exported(.syncable) == [[9], [UInt8](repeating: 7, count: 2_000), [8]])
            let writer = try #require(try origin.replicaInfo().writer)
            #expect(try exported(.syncable, excluding: writer).isEmpty)
        }
    }

    // MARK: - Helpers

    /// Two members of one passphrase group (see ``HostilePeerTests/withGroup(_:)``); the honest
    /// member has written nothing yet, so its next events are counters 1, 2, 3…
    func withGroup(_ body: (_ victim: Store, _ honest: Store, _ spare: URL) async throws -> Void) async throws {
        try await HostilePeerTests().withGroup(body)
    }

    /// An event of "format 3": just a well-formed identity prefix and one byte. No key needed.
    func opaqueSquat(origin: ReplicaID, counter: UInt64) -> OpaqueEvent {
        let bytes = [UInt8(3)] + origin.bytes + counter.bigEndianBytes + [0xAA]
        return OpaqueEvent(origin: origin, counter: counter, bytes: bytes, reason: "")
    }

    func rangeFile(events: [Event] = [], opaque: [OpaqueEvent] = [], keys: [WrappedKey] = []) -> Data {
        Data(EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: keys, events: events, opaque: opaque).encoded())
    }

    /// A relay without the group's key (travel minimum lowered to the members' test cost).
    var keylessRelayConfiguration: Store.Configuration {
        var configuration = Store.Configuration()
        configuration.travelKeyCost = .minimumForTesting
        return configuration
    }

    /// Key ids are public (every authenticator names one). A carrier that sees one at one relay stores a
    /// bogus record under that id at another keyless relay first; that relay keeps the first record per
    /// id and relays the bogus one, so a member pulling there can never open the real key's events.
    @Test func aKeyIDSquatAtAKeylessRelayDoesNotCutAMemberOff() async throws {
        try await withGroup { victim, honest, relayDirectory in
            let relay = try Store(directory: relayDirectory, configuration: keylessRelayConfiguration)
            try honest.set("one", for: .groupTheme)
            // The carrier read the honest member's key id elsewhere (another relay, a mailbox file).
            let seen = try EventRange(decoding: Array(try honest.exportRange(after: 0)))
            var bogus = try #require(seen.keys.last)  // the honest member's own key (its event is the newest)
            bogus.sealedKey = Sodium.randomBytes(bogus.sealedKey.count)
            var filler = try #require(seen.events.first)  // the relay stores the key record with any range
            filler.origin = ReplicaID.random()
            _ = try relay.importRange(rangeFile(events: [filler], keys: [bogus]), from: "HTTP push")
            try await Replicator(store: honest, peers: [.store(relay)]).sync()
            try await Replicator(store: victim, peers: [.store(relay)]).sync()
            #expect(victim[.groupTheme] == "one", "the member's events arrive under a key record a carrier replaced")
        }
    }

    // MARK: - 1. Identity squatting with an opaque ("newer format") event

    /// A carrier learns a member's current writer (any range it carries shows it) and sends its next
    /// identities as events "of a newer format". They are stored unauthenticated, so the member's
    /// real events with those identities are quarantined as conflicting, everywhere the squat got first.
    @Test func anOpaqueSquatDoesNotSuppressAMembersLaterWrites() async throws {
        try await withGroup { victim, honest, _ in
            let writer = try #require(try honest.replicaInfo().writer)
            let receipt = try victim.importRange(rangeFile(opaque: [opaqueSquat(origin: writer, counter: 3)]), from: "a file")
            #expect(receipt.quarantined == 1)  // a member keeps only newer-format items a member authenticated
            for value in ["one", "two", "three"] { try honest.set(value, for: .groupTheme) }
            try await Replicator(store: victim, peers: [.store(honest)]).sync()
            #expect(victim[.groupTheme] == "three", "the member's own third write was suppressed by a carrier")
            #expect(try victim.quarantinedItems().filter { $0.reason == .conflictingIdentity }.isEmpty)
        }
    }

    /// The same through a keyless relay (a `chronicle serve` store opened without the group's key, as the
    /// design allows): a relay accepts any well-formed event, so even a plain forged event squats an
    /// identity there, and the relay then quarantines the member's real event and relays the forgery.
    @Test func aSquatAtAKeylessRelayDoesNotCutAMemberOff() async throws {
        try await withGroup { victim, honest, relayDirectory in
            let relay = try Store(directory: relayDirectory, configuration: keylessRelayConfiguration)  // store and relay
            try await Replicator(store: victim, peers: [.store(relay)]).sync()
            let writer = try #require(try honest.replicaInfo().writer)
            // What a bearer-token holder POSTs to /v1/range: one plain event under the member's next identity.
            let forged = Event(
                origin: writer, counter: 3, replica: ReplicaID.random(), hlc: HLC.next(after: HLC(rawValue: 0), nowMilliseconds: UnixMilliseconds.now()),
                domain: .defaults, op: .set, policy: .manual, encoding: ValueEncoding.string.rawValue, sealed: false, key: Keys.groupTheme.name,
                payload: Array("squatted".utf8))
            _ = try relay.importRange(rangeFile(events: [forged]), from: "HTTP push")
            for value in ["one", "two", "three"] { try honest.set(value, for: .groupTheme) }
            try await Replicator(store: honest, peers: [.store(relay)]).sync()
            try await Replicator(store: victim, peers: [.store(relay)]).sync()
            #expect(try relay.quarantinedItems().filter { $0.reason == .conflictingIdentity }.isEmpty, "the relay set the real event aside")
            #expect(victim[.groupTheme] == "three", "a token holder cut the honest member's write off at the relay")
        }
    }

    /// A range file handed to `chronicle import` while the app has the store open: the CLI's writer is
    /// not the app's, so the squat on the app's writer is stored, and every later write of the app
    /// fails on the duplicate dot (its in-memory counter never moves past it).
    @Test func aSquatImportedByAnotherProcessDoesNotStopLocalWrites() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let app = try Store(directory: directory, configuration: passphraseConfiguration("pw"))
        try app.set("first", for: .groupTheme)  // counter 1 of the app's writer
        let writer = try #require(try app.replicaInfo().writer)
        let file = directory.deletingLastPathComponent().appendingPathComponent("squat-\(UUID().uuidString).range")
        defer { try? FileManager.default.removeItem(at: file) }
        try rangeFile(opaque: (2...4).map { opaqueSquat(origin: writer, counter: $0) }).write(to: file)
        let tool = try await runChild(["import-once", directory.path, file.path], environment: ["CHRONICLE_PASSPHRASE": "pw"])
        #expect(tool.status == 0, "\(tool.stderr)")
        for attempt in 1...3 {
            #expect(throws: Never.self, "local write \(attempt) refused") { try app.set("local \(attempt)", for: .groupTheme) }
        }
    }

    // MARK: - 2. Argon2id work per received range

    /// Each received passphrase key record with a fresh salt costs one Argon2id run before the import,
    /// at the cost the record names (up to SENSITIVE: 1 GiB, 4 passes). A range of 64 forged events,
    /// each naming its own bogus key, costs a batch's budget; the rest wait and cost the same at
    /// later imports, once each. Here at the test's minimum cost.
    @Test func aRangeOfBogusKeyRecordsCostsBoundedDerivations() async throws {
        try await withGroup { victim, honest, _ in
            let keyring = try victim.crypto.get()
            let model = try #require(try EventRange(decoding: Array(try victim.exportRange(after: 0))).events.first)
            let records = (0..<64).map { _ in
                WrappedKey(
                    id: KeyID.random(), kind: .passphrase, salt: Sodium.randomBytes(PasswordHash.saltBytes),
                    limits: victim.configuration.travelKeyCost.limits, created: 0, nonce: Sodium.randomBytes(AEAD.nonceBytes),
                    sealedKey: Sodium.randomBytes(48))
            }
            let events = records.map { record in
                var event = model
                event.origin = ReplicaID.random()
                event.authenticator?.keyID = record.id
                return event
            }
            let before = keyring.keks.derivations
            _ = try victim.importRange(rangeFile(events: events, keys: records), from: "a file")
            // The import derived its batch's budget; the retry it started, a pass's.
            victim.waitForKeyRecordRetries()
            var reasons = try victim.quarantinedItems().map(\.reason)
            let first = Keyring.derivationsPerBatch + Keyring.waitingDerivationsPerPass
            #expect(keyring.keks.derivations - before == first)
            #expect(reasons.filter { $0 == .unopenableKey }.count == first)
            #expect(reasons.filter { $0 == .derivationBudget }.count == 64 - first)
            // The next import (an honest one) derives its own key and applies its events in full.
            try honest.set("honest", for: .groupTheme)
            let imports = Shared(0)
            let counting = CountingTransport(base: StoreTransport(store: honest), pulls: imports)
            try await Replicator(store: victim, peers: [Peer(name: "honest", transport: counting)]).sync()
            #expect(victim[.groupTheme] == "honest")
            victim.waitForKeyRecordRetries()
            reasons = try victim.quarantinedItems().map(\.reason)
            // One derivation for the honest member's key, and at most a pass's per import since.
            let derived = keyring.keks.derivations - before
            #expect(derived > first && derived <= first + 1 + Keyring.waitingDerivationsPerPass * imports.withLock { $0 })
            #expect(reasons.filter { $0 == .unopenableKey }.count == derived - 1)
            #expect(keyring.keks.cachedCount <= 3)  // only this store's own KEKs are kept as its own
        }
    }

    // MARK: - 3. Tamper evidence

    /// Someone with the files but not the key rewrites the log unkeyed, changes a value, and also deletes
    /// `dk.active` (not only `chain.key`, `chain.inlog` and `head.mac`): the "has a data key but an
    /// unkeyed chain" check looks only at `dk.active`, and the next open makes a new active key.
    @Test func aRechainedLogWithoutAnActiveKeyFailsVerify() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let store = try Store(directory: directory, configuration: passphraseConfiguration("pw"))
            store[.groupTheme] = "dark"
            try store.set("s3cr3t", for: .groupToken)
            try rechainWithoutKey(store, alsoDeleting: [MetaKey.activeKey]) { events in
                if let index = events.firstIndex(where: { $0.key == Keys.groupTheme.name }) { events[index].payload = Array("forged".utf8) }
            }
            try store.rebuildViews()
        }
        // Opening with the key source says the store is damaged (it holds its own key, none active),
        // rather than minting a new key over the forgery.
        #expect {
            _ = try Store(directory: directory, configuration: passphraseConfiguration("pw"))
        } throws: { error in
            guard case let .corruptMeta(entry, _) = error as? ChronicleError else { return false }
            return entry == "dk.active"
        }
    }

    // MARK: - 4. Shared folder (mailbox) written by a carrier

    /// One stray file with a high number in `ranges/`: pulls ask for the next missing file and fail, and
    /// since a sync pulls before it pushes, no member pushes or pulls through the folder again.
    @Test func aStrayHighNumberedMailboxFileStallsNobody() async throws {
        try await withGroup { victim, honest, folder in
            try honest.set("one", for: .groupTheme)
            try await Replicator(store: honest, peers: [.directory(folder)]).sync()
            try await Replicator(store: victim, peers: [.directory(folder)]).sync()
            #expect(victim[.groupTheme] == "one")
            // The carrier (write access to the folder, no key) drops one file.
            try Data("junk".utf8).write(to: folder.appendingPathComponent("ranges").appendingPathComponent("99999999999999999999.range"))
            try honest.set("two", for: .groupTheme)
            _ = try? await Replicator(store: honest, peers: [.directory(folder)]).sync()
            _ = try? await Replicator(store: victim, peers: [.directory(folder)]).sync()
            #expect(victim[.groupTheme] == "two", "one junk file stopped the mailbox for every member")
        }
    }

    /// `mailbox.id` is the carrier's to write: set to a member's own replica id (public in every event),
    /// that member's syncs through the folder silently move nothing ("a store never syncs with itself").
    @Test func aForgedMailboxIDDoesNotSilentlyCutAMemberOff() async throws {
        try await withGroup { victim, honest, folder in
            try await Replicator(store: victim, peers: [.directory(folder)]).sync()
            try (try victim.replicaID).hex.write(to: folder.appendingPathComponent("mailbox.id"), atomically: true, encoding: .utf8)
            try honest.set("one", for: .groupTheme)
            try await Replicator(store: honest, peers: [.directory(folder)]).sync()
            let report = try await Replicator(store: victim, peers: [.directory(folder)]).sync()  // no error
            #expect(victim[.groupTheme] == "one", "sync reported success and moved nothing: \(report.peers.count) peer reports")
        }
    }

    // MARK: - 5. A relay restored from a backup in place

    /// The relay (same inode, same replica id, same epoch) loses events members pushed to it. The members'
    /// push checkpoints still count them as delivered (only the pusher's own chain is checked), so they are
    /// never sent again and a member that syncs only through the relay never gets them.
    @Test func aRelayRestoredInPlaceGetsBackWhatWasPushedToIt() async throws {
        let directories = (0..<3).map { _ in temporaryDirectory() }
        defer { for directory in directories { try? FileManager.default.removeItem(at: directory) } }
        let configuration = passphraseConfiguration("the group")
        let writer = try Store(directory: directories[0], configuration: configuration)
        let reader = try Store(directory: directories[2], configuration: configuration)
        let k1 = Key<Int>("review.k1", default: 0, sync: .manual)
        let k2 = Key<Int>("review.k2", default: 0, sync: .manual)
        let dataFile = directories[1].appendingPathComponent("data.mdb")
        let backup: Data
        do {
            let relay = try Store(directory: directories[1], configuration: configuration)
            try writer.set(1, for: k1)
            try await Replicator(store: writer, peers: [.store(relay)]).sync()
            backup = try Data(contentsOf: dataFile)
            try writer.set(2, for: k2)
            try await Replicator(store: writer, peers: [.store(relay)]).sync()
            #expect(relay[k2] == 2)
        }
        let handle = try FileHandle(forWritingTo: dataFile)
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: backup)
        try handle.synchronize()
        try handle.close()
        let relay = try Store(directory: directories[1], configuration: configuration)
        try await Replicator(store: writer, peers: [.store(relay)]).sync()
        try await Replicator(store: reader, peers: [.store(relay)]).sync()
        #expect(reader[k1] == 1)
        #expect(reader[k2] == 2, "the relay lost k2 and no member will ever send it again")
    }
}
