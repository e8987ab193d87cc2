@testable import Chronicle
@testable import ChronicleLog
import ChronicleSodium
import ChronicleTesting
import Foundation
import Synchronization
import Testing

/// How a carrier (a token, write access to the shared folder, or a range file, but not the
/// group's key) delivers a forged range to a victim.
enum Carrier: String, CaseIterable, Sendable {
    /// `chronicle import FILE`.
    case file
    /// A file dropped into the shared folder both replicas sync through.
    case mailbox
}

extension Keys {
    static let groupTheme = Key<String>("group.theme", default: "system", sync: .manual)
    static let groupToken = SecretKey<String?>("group.token", sync: .manual)
}

/// A carrier attacks a sync group whose members share a passphrase. After each attack the
/// victim still reads what it had, still writes, and still syncs with an honest member.
struct HostilePeerTests {
    /// A victim and an honest member of one group, each in its own directory, and a shared folder.
    func withGroup(_ body: (_ victim: Store, _ honest: Store, _ folder: URL) async throws -> Void) async throws {
        let directories = (0..<3).map { _ in temporaryDirectory() }
        defer { for directory in directories { try? FileManager.default.removeItem(at: directory) } }
        let victim = try Store(directory: directories[0], configuration: passphraseConfiguration("the group"))
        let honest = try Store(directory: directories[1], configuration: passphraseConfiguration("the group"))
        try victim.set("dark", for: .groupTheme)
        try victim.set("s3cr3t", for: .groupToken)
        try await Replicator(store: honest, peers: [.store(victim)]).sync()
        #expect(honest[.groupToken] == "s3cr3t")
        try await body(victim, honest, directories[2])
    }

    /// What a carrier can read: the victim's own range, as a peer pulls it.
    func victimsRange(_ victim: Store) throws -> EventRange {
        try EventRange(decoding: Array(try victim.exportRange(after: 0)))
    }

    /// Delivers `range` to `victim` the way `carrier` would; returns the receipt of the victim's import.
    func deliver(_ range: EventRange, to victim: Store, by carrier: Carrier, folder: URL) async throws -> RangeReceipt {
        switch carrier {
        case .file:
            return try victim.importRange(Data(range.encoded()), from: "a file")
        case .mailbox:
            _ = try await DirectoryTransport(directory: folder).push(Data(range.encoded()))
            let report = try await Replicator(store: victim, peers: [.directory(folder)]).sync()
            return report.peers.first?.pulled ?? RangeReceipt()
        }
    }

    /// The victim still reads its values, writes, and syncs both ways with an honest member.
    func expectUnharmed(_ victim: Store, _ honest: Store, theme: String = "dark", token: String = "s3cr3t") async throws {
        #expect(victim[.groupTheme] == theme)
        #expect(try victim.value(for: .groupToken) == token)
        try victim.set("after the attack", for: .groupToken)
        victim[.groupTheme] = "light"
        try await Replicator(store: honest, peers: [.store(victim)]).sync()
        #expect(honest[.groupToken] == "after the attack")
        #expect(honest[.groupTheme] == "light")
        try honest.set("from honest", for: .groupToken)
        try await Replicator(store: victim, peers: [.store(honest)]).sync()
        #expect(victim[.groupToken] == "from honest")
        #expect(try victim.verify().isSound)
    }

    @Test(arguments: Carrier.allCases)
    func aForgedSealedRemoveDeletesNoSecret(carrier: Carrier) async throws {
        try await withGroup { victim, honest, folder in
            var range = try victimsRange(victim)
            // The carrier re-dates the victim's own sealed event as a remove from a writer of its own.
            var forged = try #require(range.events.first { $0.domain == .secrets })
            forged.origin = ReplicaID.random()
            forged.counter = 1
            forged.op = .remove
            forged.hlc = HLC(rawValue: forged.hlc.rawValue + (60_000 << 16))
            range.events = [forged]
            let receipt = try await deliver(range, to: victim, by: carrier, folder: folder)
            #expect(receipt.quarantined >= 1 && receipt.applied == 0)
            #expect(try victim.quarantinedItems().contains { $0.reason == .unauthenticated && $0.isSealed })
            try await expectUnharmed(victim, honest)
        }
    }

    @Test(arguments: Carrier.allCases)
    func aForgedPlainSetChangesNoValue(carrier: Carrier) async throws {
        try await withGroup { victim, honest, folder in
            var range = try victimsRange(victim)
            var forged = try #require(range.events.first { $0.key == Keys.groupTheme.name })
            forged.origin = ReplicaID.random()
            forged.counter = 1
            forged.payload = Array("hacked".utf8)
            forged.hlc = HLC(rawValue: forged.hlc.rawValue + (60_000 << 16))
            forged.authenticator = Event.Authenticator(keyID: KeyID.random(), tag: try #require(AuthenticationTag(bytes: Sodium.randomBytes(32))))  // a garbage seal
            range.events = [forged]
            let receipt = try await deliver(range, to: victim, by: carrier, folder: folder)
            #expect(receipt.quarantined == 1)
            try await expectUnharmed(victim, honest)
        }
    }

    @Test(arguments: Carrier.allCases)
    func anOwnIdentityWithAHugeCounterCrashesNothing(carrier: Carrier) async throws {
        try await withGroup { victim, honest, folder in
            var range = try victimsRange(victim)
            let writer = try #require(try victim.replicaInfo().writer)
            var huge = try #require(range.events.first)
            huge.origin = writer
            huge.counter = .max
            var claim = huge
            claim.counter = 1_000  // this writer's, but never written by it
            range.events = [huge, claim]
            let receipt = try await deliver(range, to: victim, by: carrier, folder: folder)
            #expect(receipt.applied == 0)
            if carrier == .file {
                #expect(Set(try victim.quarantinedItems().map(\.reason)) == [.absurdCounter, .claimsOwnIdentity])
            }  // a mailbox pull leaves out the puller's own writer: the claims never even arrive
            try await expectUnharmed(victim, honest)
            // After a restart too.
            let reopened = try Store(directory: victim.directory, configuration: passphraseConfiguration("the group"))  // an open store keeps no passphrase
            try reopened.set("after a restart", for: .groupToken)
            #expect(reopened[.groupToken] == "after a restart")
        }
    }

    @Test(arguments: Carrier.allCases)
    func bogusKeyRecordsStopNobodyAndCostNoDerivation(carrier: Carrier) async throws {
        try await withGroup { victim, honest, folder in
            var range = try victimsRange(victim)
            let real = try #require(range.keys.first)
            // One record that would need a 4 GiB Argon2id run, one this group's passphrase cannot open.
            var expensive = real
            expensive.id = KeyID.random()
            expensive.limits = PasswordHash.Limits(opsLimit: 64, memLimit: 4 << 30)
            var foreign = real
            foreign.id = KeyID.random()
            foreign.salt = Sodium.randomBytes(PasswordHash.saltBytes)
            range.keys = [expensive, foreign]
            var forged = try #require(range.events.first)  // a mailbox stores only ranges with events
            forged.origin = ReplicaID.random()
            range.events = [forged]
            let derivations = try victim.crypto.get().keks.derivations
            _ = try await deliver(range, to: victim, by: carrier, folder: folder)
            // Records no event names are ignored: never derived, never kept.
            #expect(try victim.quarantinedItems().map(\.reason) == [.unauthenticated])
            #expect(try victim.crypto.get().keks.derivations == derivations)
            try await expectUnharmed(victim, honest)
        }
    }

    @Test func aSquattedIdentityCutsNoMemberOff() async throws {
        try await withGroup { victim, honest, folder in
            // The carrier learns the honest member's current writer and sends its next identity first.
            let writer = try #require(try honest.replicaInfo().writer)
            var range = try victimsRange(victim)
            var squat = try #require(range.events.first { $0.key == Keys.groupTheme.name })
            squat.origin = writer
            squat.counter = 3  // honest has written nothing yet: its next events are 1, 2, 3…
            squat.payload = Array("squatted".utf8)
            range.events = [squat]
            #expect(try await deliver(range, to: victim, by: .file, folder: folder).quarantined == 1)
            for value in ["one", "two", "three"] { honest[.groupTheme] = value }
            try await Replicator(store: victim, peers: [.store(honest)]).sync()
            #expect(victim[.groupTheme] == "three")
            try await expectUnharmed(victim, honest, theme: "three")
        }
    }

    /// An event of a newer format that a member of the group authenticated (its authenticator at the
    /// end, where every format keeps it) is stored and relayed, never applied; one without a valid
    /// authenticator is quarantined and never relayed.
    @Test func eventsOfANewerFormatAreStoredAndRelayedNotApplied() async throws {
        try await withGroup { victim, honest, folder in
            try honest.set("from a newer build", for: .groupTheme)
            var range = try EventRange(decoding: Array(try honest.exportRange(after: 0)))
            var model = try #require(range.events.last)  // the honest member's event, under its own key
            model.origin = ReplicaID.random()  // a writer of the newer build
            let genuine = try futureFormatItem(from: model, authenticatedBy: honest)
            var forged = genuine
            forged.bytes[forged.bytes.count - 40] ^= 1  // inside the tag
            range.events = []
            range.opaque = [genuine, forged]
            let receipt = try await deliver(range, to: victim, by: .file, folder: folder)
            #expect(receipt.opaque == 1 && receipt.quarantined == 1)  // the key its authenticator names travelled with it
            #expect(try victim.importRange(Data(range.encoded())).duplicates == 1)  // the genuine one is known now
            #expect(victim[.groupTheme] == "dark", "an item of a newer format applied")
            // It relays to the next replica as it arrived, and applies nowhere.
            try await Replicator(store: honest, peers: [.store(victim)]).sync()
            #expect(try honest.statistics().records == (try victim.statistics().records))
            #expect(try honest.quarantinedItems().isEmpty)
            try await expectUnharmed(victim, honest, theme: "from a newer build")
        }
    }

    @Test func garbageThatIsNotARangeIsRefusedWhole() async throws {
        try await withGroup { victim, honest, _ in
            var bytes = try victimsRange(victim).encoded()
            bytes[bytes.count / 2] ^= 0xFF
            #expect(throws: ChronicleError.self) { try victim.importRange(Data(bytes)) }
            #expect(try victim.quarantinedItems().isEmpty)
            try await expectUnharmed(victim, honest)
        }
    }

    /// Stores opened without an explicit key source (`Store.standard` by default) are not a
    /// group: they accept what their transports deliver, as the README's trust model says.
    @Test func aStoreWithoutAKeySourceAcceptsWhatItsTransportDelivers() async throws {
        try await withTemporaryStores(2) { stores in
            let (victim, carrier) = (stores[0], stores[1])
            victim[.small] = "mine"
            var range = try EventRange(decoding: Array(try victim.exportRange(after: 0)))
            range.events[0].origin = try #require(try carrier.replicaInfo().writer)
            range.events[0].payload = Array("carried".utf8)
            range.events[0].hlc = HLC(rawValue: range.events[0].hlc.rawValue + (1_000 << 16))
            #expect(try victim.importRange(Data(range.encoded())).applied == 1)
            #expect(victim[.small] == "carried")
        }
    }
}
