@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import ChronicleLMDB
import ChronicleSodium
import InMemoryLogging
import Logging
import Synchronization
import Testing

struct KeyGroupTests {
    /// A new device with a mistyped passphrase is not a member: it can open nothing of the
    /// group's, sees why in its quarantine, and the group takes nothing from it.
    @Test func aReplicaWithTheWrongPassphraseChangesNothingAndSeesWhy() async throws {
        let directories = (0..<2).map { _ in temporaryDirectory() }
        defer { for directory in directories { try? FileManager.default.removeItem(at: directory) } }
        let a = try Store(directory: directories[0], configuration: passphraseConfiguration("group passphrase"))
        try a.set("from a", for: SecretKey<String?>("group.secret", sync: .manual))
        let typo = try Store(directory: directories[1], configuration: passphraseConfiguration("group passphrasr"))
        try typo.set("typo's", for: SecretKey<String?>("group.secret", sync: .manual))
        typo[Key<String>("group.note", default: "", sync: .manual)] = "typo's note"
        let report = try await Replicator(store: typo, peers: [.store(a)]).sync()
        #expect(report.peers.first?.pulled.quarantined ?? 0 >= 2)  // a's key record and a's event
        #expect(Set(try typo.quarantinedItems().map(\.reason)).isSuperset(of: [.unopenableKey, .awaitingKey]))
        #expect(report.peers.first?.pushed.quarantined ?? 0 >= 3)  // typo's key record and both events
        // Neither side's values changed, and both keep writing.
        #expect(a[SecretKey<String?>("group.secret", sync: .manual)] == "from a")
        #expect(a[Key<String>("group.note", default: "", sync: .manual)] == "")
        #expect(typo[SecretKey<String?>("group.secret", sync: .manual)] == "typo's")
        try a.set("still a", for: SecretKey<String?>("group.secret", sync: .manual))
        try typo.set("still typo", for: SecretKey<String?>("other.secret"))
        // The same passphrase on the new device is all it takes.
        let fixed = try Store(directory: temporaryDirectory(), configuration: passphraseConfiguration("group passphrase"))
        defer { try? FileManager.default.removeItem(at: fixed.directory) }
        try await Replicator(store: fixed, peers: [.store(a)]).sync()
        #expect(fixed[SecretKey<String?>("group.secret", sync: .manual)] == "still a")
        try fixed.set("from the new device", for: SecretKey<String?>("group.secret", sync: .manual))
        try await Replicator(store: fixed, peers: [.store(a)]).sync()
        #expect(a[SecretKey<String?>("group.secret", sync: .manual)] == "from the new device")
    }
}

/// Wherever a passphrase-wrapped key leaves a store, it is wrapped at MODERATE or more,
/// whatever the store's own (cheaper) cost.
struct TravellingKeyTests {
    @Test func keysLeaveAtModerateCostOrMore() throws {
        var configuration = Store.Configuration(keySource: .passphrase("pw"), keyDerivationCost: .minimumForTesting)
        configuration.travelKeyCost = .moderate  // as outside the tests
        try withTemporaryStore(configuration: configuration) { store, _ in
            try store.set("s3cr3t", for: .groupToken)  // a secret that syncs
            let moderate = KeyDerivationCost.moderate
            let atRest = try store.eventLog.keyRecords.wrappedKeys()
            #expect(atRest.allSatisfy { $0.limits.opsLimit < moderate.passes })  // cheap at rest, as configured
            let range = try EventRange(decoding: Array(try store.exportRange(after: 0)))
            let bundle = try KeyBundle.decode(Array(try store.exportDataKeys()))
            for record in range.keys + bundle {
                #expect(record.limits.opsLimit >= moderate.passes && record.limits.memLimit >= moderate.memoryBytes)
            }
            #expect(!range.keys.isEmpty)
        }
    }
}
