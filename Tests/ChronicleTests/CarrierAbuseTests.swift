@_spi(Wire) @testable import Chronicle
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleSodium
import ChronicleTesting
import Foundation
import Testing

/// More of what a carrier (and someone with the files but no key) can cost a member: key records
/// left waiting, junk key records in a store's own meta, relays' verify and storage, the tool's input.
struct CarrierAbuseTests {
    let bounds = CarrierCostBoundsTests()

    func withGroup(_ body: (_ victim: Store, _ honest: Store, _ spare: URL) async throws -> Void) async throws {
        try await HostilePeerTests().withGroup(body)
    }

    func carrierRange(keys: [WrappedKey] = [], events: [Event]) -> Data {
        Data(EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: keys, events: events, opaque: []).encoded())
    }

    // MARK: - Key derivations

    /// A genuine key left waiting (reason 8) gets a derivation in every later import, however many
    /// junk records of their own later batches bring (a carrier's four per batch kept it waiting).
    @Test func aKeyLeftWaitingGetsItsTurnWhateverLaterBatchesBring() async throws {
        try await withGroup { victim, _, spare in
            var (range, _) = try bounds.newcomersRange(spare)
            let genuine = try #require(range.keys.first { key in range.events.contains { $0.authenticator?.keyID == key.id } })
            range.keys = (0..<Keyring.derivationsPerBatch).map { _ in bounds.junkKeyRecord(id: genuine.id, like: genuine) } + range.keys
            // The newcomer's event waits for its key, which this import's budget left waiting
            // (the receipt counts what it set aside: the retry it starts may open the key at once).
            let first = try victim.importRange(Data(range.encoded()), from: "a file")
            #expect(first.quarantined >= 1, "nothing of the newcomer's waited for its key")
            let model = try #require(range.events.first)
            for _ in 0..<6 {
                let id = KeyID.random()
                var forged = model
                forged.origin = ReplicaID.random()
                forged.authenticator?.keyID = id
                let junk = (0..<Keyring.derivationsPerBatch).map { _ in bounds.junkKeyRecord(id: id, like: genuine) }
                _ = try victim.importRange(carrierRange(keys: junk, events: [forged]), from: "a carrier")
                // The retry an import starts runs on a thread of its own: wait for it, so the
                // carrier's next import cannot spend the minute's derivations before it runs
                // (what failed under load: the retry thread not scheduled yet).
                victim.waitForKeyRecordRetries()
            }
            #expect(victim[.groupTheme] == "from the newcomer", "six later imports never tried the waiting genuine key")
            // Control: once the carrier stops, any import (here an empty one) opens it at once.
            _ = try victim.importRange(carrierRange(events: []), from: "anyone")
            victim.waitForKeyRecordRetries()
            #expect(victim[.groupTheme] == "from the newcomer", "the genuine key is not merely starved")
        }
    }

    // MARK: - dk.active refusal

    func forgedMemberStore(_ directory: URL, deletingOwnKeyRecords: Bool, junkRecords: Int) throws {
        let store = try Store(directory: directory, configuration: passphraseConfiguration("pw"))
        store[.groupTheme] = "dark"
        try store.set("s3cr3t", for: .groupToken)
        let eventLog = try store.eventLog
        let own = try eventLog.keyRecords.wrappedKeys()
        let model = try #require(own.first)
        var extra = [MetaKey.activeKey]
        if deletingOwnKeyRecords { extra += own.flatMap { [MetaKey.wrappedKey($0.id), MetaKey.travelKey($0.id)] } }
        try rechainWithoutKey(store, alsoDeleting: extra) { events in
            if deletingOwnKeyRecords {
                events.removeAll { $0.sealed }
                for index in events.indices { events[index].authenticator = nil }
            }
            if let index = events.firstIndex(where: { $0.key == Keys.groupTheme.name }) { events[index].payload = Array("forged".utf8) }
        }
        // Junk passphrase records under ids that list before the store's own.
        try eventLog.environment.write { txn in
            for n in 0..<junkRecords {
                let id = try #require(KeyID(bytes: [UInt8](repeating: 0, count: KeyID.length - 1) + [UInt8(n)]))
                try txn.put(eventLog.dbs.meta, key: MetaKey.wrappedKey(id), value: bounds.junkKeyRecord(id: id, like: model).encoded())
            }
        }
        try store.rebuildViews()
    }

    /// A member store holding its own data key but no `dk.active` refuses to open, whatever junk key
    /// records sort before its own (the check once tried four salts, in key-id order).
    @Test func junkKeyRecordsDoNotHideAStoresOwnKeyFromTheActiveKeyCheck() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try forgedMemberStore(directory, deletingOwnKeyRecords: false, junkRecords: Keyring.derivationsPerBatch)
        var refused = false
        do { _ = try Store(directory: directory, configuration: passphraseConfiguration("pw")) } catch {
            if case let .corruptMeta(entry, _) = error { refused = entry == "dk.active" }
        }
        #expect(refused, "the store opened and minted a new key over the forgery")
    }



    // MARK: - Stripped authenticators

    /// The "stripped authenticator" check of `verify` is a member's: a relay keeps what it cannot
    /// judge, and one unauthenticated event naming a member's replica id is no damage there.
    @Test func aCarrierEventDoesNotMakeARelaysVerifyReportTampering() async throws {
        try await withGroup { victim, _, relayDirectory in
            let relay = try Store(directory: relayDirectory)
            try await Replicator(store: relay, peers: [.store(victim)]).sync()
            #expect(try relay.verify().isSound)
            var forged = try #require(try HostilePeerTests().victimsRange(victim).events.first { !$0.sealed })
            forged.origin = ReplicaID.random()
            forged.counter = 1
            forged.authenticator = nil  // `replica` stays the victim's
            let receipt = try relay.importRange(carrierRange(events: [forged]), from: "a carrier")
            #expect(receipt.applied == 1)
            var sound = false
            do { sound = try relay.verify().isSound } catch {}
            #expect(sound, "one carrier event made an untouched relay fail verify")
        }
    }

    // MARK: - Relays

    /// Key records of a newer kind at a keyless relay are kept only when an event names their id,
    /// at most 4 KiB each, 16 per id: a carrier cannot grow a relay with them (16 MiB per range
    /// before).
    @Test func newerKindKeyRecordsAtARelayAreBounded() throws {
        try withTemporaryStore { relay, _ in
            let before = try relay.statistics().usedBytes
            for _ in 0..<6 {
                let records = (0..<2).map { _ in [UInt8(2)] + KeyID.random().bytes + [UInt8(9)] + Sodium.randomBytes(8 << 20) }
                let bytes = RelayRange.encode(
                    source: ReplicaID.random().bytes, epoch: LogEpoch.random().bytes, after: 0, upTo: 0, head: 0, afterChain: RelayRange.emptyChain,
                    upToChain: RelayRange.emptyChain, keys: records, events: [])
                _ = try relay.importRange(Data(bytes), from: "a carrier")
            }
            let stats = try relay.statistics()
            #expect(stats.usedBytes - before < RelayOnlyBounds.relayOnlyByteCapacity, "grew by \(stats.usedBytes - before) bytes, relay-only \(stats.relayOnlyBytes)")
        }
    }

    // MARK: - chronicle import
}
