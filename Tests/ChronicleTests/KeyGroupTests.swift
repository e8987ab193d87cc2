@testable import Chronicle
import ChronicleTesting
import Foundation
import ChronicleLMDB
import InMemoryLogging
import Logging
import Synchronization
import Testing

struct KeyGroupTests {
    @Test func aReplicaWithTheWrongPassphraseRefusesToWriteSecrets() async throws {
        let directories = (0..<2).map { _ in temporaryDirectory() }
        defer { for directory in directories { try? FileManager.default.removeItem(at: directory) } }
        let a = try Store(directory: directories[0], configuration: passphraseConfiguration("group passphrase"))
        try a.set("from a", for: SecretKey<String?>("group.secret", sync: .manual))
        let typo = try Store(directory: directories[1], configuration: passphraseConfiguration("group passphrasr"))
        try await Replicator(store: typo, peers: [.store(a)]).sync()
        #expect(throws: ChronicleError.wrongKey) { try typo.value(for: SecretKey<String?>("group.secret", sync: .manual)) }
        #expect(throws: ChronicleError.wrongKey) { try typo.set("mine", for: SecretKey<String?>("other.secret")) }
        #expect(try typo.logEntries().filter { $0.domain == "secrets" }.count == 1)  // only the relayed one
        // The same passphrase on the new device is all it takes.
        let fixed = try Store(directory: temporaryDirectory(), configuration: passphraseConfiguration("group passphrase"))
        defer { try? FileManager.default.removeItem(at: fixed.directory) }
        try await Replicator(store: fixed, peers: [.store(a)]).sync()
        #expect(fixed[SecretKey<String?>("group.secret", sync: .manual)] == "from a")
        try fixed.set("from the new device", for: SecretKey<String?>("group.secret", sync: .manual))
        try await Replicator(store: fixed, peers: [.store(a)]).sync()
        #expect(a[SecretKey<String?>("group.secret", sync: .manual)] == "from the new device")
    }
}
