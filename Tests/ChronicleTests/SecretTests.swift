@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import ChronicleLMDB
import InMemoryLogging
import Logging
import Synchronization
import Testing

struct SecretTests {
    /// A sealed value written under a key's former name was opened with the new name, which its
    /// seal's associated data does not hold: the read failed as tampered and gave the default.
    @Test(arguments: [false, true]) func aSealedValueIsReadUnderAFormerName(encryptDefaults: Bool) throws {
        try withTemporaryStore(configuration: passphraseConfiguration("pw", encryptDefaults: encryptDefaults)) { store, _ throws in
            try store.set("old secret", for: SecretKey<String>("token.old", default: ""))
            #expect(store[SecretKey<String>("token.new", default: "", formerNames: ["token.old"])] == "old secret")
            #expect(try store.value(for: SecretKey<String>("token.new", default: "", formerNames: ["token.old"])) == "old secret")
            try store.set("old value", for: Key<String>("plain.old", default: ""))
            #expect(store[Key<String>("plain.new", default: "", formerNames: ["plain.old"])] == "old value")
        }
    }

    /// A secret is a `Key` with a sealed value: every entry point that takes a key takes it, and a
    /// plain key and a secret of the same name never read each other's value.
    @Test func aSecretKeyGoesThroughEveryKeyEntryPoint() async throws {
        try await withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, directory async throws in
            let plain = Key<String>("shared.name", default: "")
            let secret = SecretKey<String>("shared.name", default: "")
            let updates = store.updates(of: secret)
            store[plain] = "plain"
            store[secret] = "secret one"
            #expect(store[plain] == "plain")
            #expect(store[secret] == "secret one")
            try store.set("secret two", for: secret)
            #expect(try store.value(for: secret) == "secret two")
            #expect(try store.value(for: plain) == "plain")
            try store.write { batch in
                #expect(batch[secret] == "secret two")
                batch[secret] = "secret three"
                #expect(batch[secret] == "secret three")
                #expect(batch[plain] == "plain")
            }
            #expect(try store.update(secret) { $0 += "!" } == "secret three!")
            #expect(try store.history(of: secret).compactMap(\.value) == ["secret one", "secret two", "secret three", "secret three!"])
            #expect(try store.history(of: plain).compactMap(\.value) == ["plain"])
            let heard = await collect(updates) { $0.last == "secret three!" }
            #expect(heard.last == "secret three!")
            try store.remove(secret)
            #expect(store[secret] == "")
            #expect(store[plain] == "plain")
            // Sealed on disk: the plaintext of the secret is nowhere in the file.
            let file = try Data(contentsOf: directory.appendingPathComponent("data.mdb"))
            #expect(file.range(of: Data("secret three".utf8)) == nil)
        }
    }

    @Test func secretsRoundTripInEveryForm() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, _ throws in
            #expect(store[.apiToken] == nil)
            store[.apiToken] = "s3cr3t"
            #expect(store[.apiToken] == "s3cr3t")
            try store.set(1234, for: .pin)
            #expect(try store.value(for: .pin) == 1234)
            try store.write { batch in
                batch[.apiToken] = "rotated"
                batch[.pin] = 4321
                batch[.theme] = .dark
            }
            #expect(store[.apiToken] == "rotated" && store[.pin] == 4321 && store[.theme] == .dark)
            try store.remove(.apiToken)
            #expect(store[.apiToken] == nil)
            #expect(try store.history(of: .apiToken).map(\.value) == ["s3cr3t", "rotated", nil])
            let entries = try store.logEntries().filter { $0.domain == "secrets" }
            #expect(entries.count == 5)
            #expect(entries.allSatisfy { $0.isSealed && $0.valueJSON == nil })  // removes are sealed too
            #expect(try store.verify().isSound)
        }
    }

    @Test(arguments: [false, true])
    func plaintextNeverReachesTheDisk(encryptDefaults: Bool) throws {
        let secretMarker = "SECRET-MARKER-\(UUID().uuidString)"
        let plainMarker = "PLAIN-MARKER-\(UUID().uuidString)"
        try withTemporaryStore(configuration: passphraseConfiguration("pw", encryptDefaults: encryptDefaults)) { store, directory throws in
            try store.set(secretMarker, for: .apiToken)
            let plainKey = Key<String>("plain.note", default: "")
            try store.set(plainMarker, for: plainKey)
            try store.rebuildViews()
            try store.rotateDataKey(reseal: true)
            #expect(store[.apiToken] == secretMarker)
            #expect(store[plainKey] == plainMarker)
            var plainSeen = false
            for (file, data) in try allBytes(under: directory) {
                #expect(data.range(of: Data(secretMarker.utf8)) == nil, "secret plaintext in \(file.lastPathComponent)")
                if data.range(of: Data(plainMarker.utf8)) != nil { plainSeen = true }
            }
            // Plain values are stored in the clear unless encryptDefaults is on (this also shows the scan works).
            #expect(plainSeen == !encryptDefaults)
        }
    }

    /// `verify` of a keyed log opened without its key cannot check the chain: it says so with
    /// `keyUnavailable`, never a report of damage that is not there.
    @Test func verifyWithoutTheKeyThrowsRatherThanReportingDamage() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let store = try Store(directory: directory, configuration: passphraseConfiguration("pw"))
            try store.set(.dark, for: .theme)
            #expect(try store.verify().isSound)
        }
        let keyless = try Store(directory: directory)
        #expect(keyless[.theme] == .dark, "plain values still read")
        #expect {
            try keyless.verify()
        } throws: { error in
            guard case ChronicleError.keyUnavailable = error else { return false }
            return true
        }
    }

    @Test func wrongPassphraseFailsAtOpenBeforeAnyWrite() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let store = try Store(directory: directory, configuration: passphraseConfiguration("right"))
            try store.set("value", for: .apiToken)
        }
        let before = try Data(contentsOf: directory.appendingPathComponent("data.mdb"))
        #expect(throws: ChronicleError.wrongKey) {
            _ = try Store(directory: directory, configuration: passphraseConfiguration("wrong"))
        }
        #expect(try Data(contentsOf: directory.appendingPathComponent("data.mdb")) == before)
        let store = try Store(directory: directory, configuration: passphraseConfiguration("right"))
        #expect(store[.apiToken] == "value")
    }

    @Test func withoutTheKeyPlainValuesStillReadAndSecretsReportWhy() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let store = try Store(directory: directory, configuration: passphraseConfiguration("pw"))
            try store.set("value", for: .apiToken)
            try store.set(.dark, for: .theme)
        }
        let keyless = try Store(directory: directory)  // no key source: the passphrase-wrapped key cannot open
        #expect(keyless[.theme] == .dark)
        #expect(throws: ChronicleError.wrongKey) { try keyless.value(for: .apiToken) }
        #expect(keyless[.apiToken] == nil)  // logged, read as the default
        #expect(throws: ChronicleError.self) { try keyless.set("overwrite", for: .apiToken) }  // refuses to write secrets
        let store = try Store(directory: directory, configuration: passphraseConfiguration("pw"))
        #expect(store[.apiToken] == "value")
        #expect(try store.history(of: .apiToken).count == 1)
    }

    @Test func tamperedSealedRecordIsDetected() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, _ throws in
            try store.set("value", for: .apiToken)
            let eventLog = try store.eventLog
            // Flip one ciphertext byte of the view entry.
            try eventLog.environment.write { txn in
                var bytes = try #require(try txn.get(eventLog.dbs.secrets, key: Array("auth.token".utf8)))
                bytes[bytes.count - 20] ^= 0x01
                try txn.put(eventLog.dbs.secrets, key: Array("auth.token".utf8), value: bytes)
            }
            #expect {
                try store.value(for: .apiToken)
            } throws: { error in
                guard case ChronicleError.tampered(_, "auth.token") = error else { return false }
                return true
            }
            #expect(!(try store.verify().isSound))  // the view no longer equals a replay
            try store.rebuildViews()  // the log is intact: rebuilding repairs the view
            #expect(store[.apiToken] == "value")
        }
    }

    @Test func sealedValueMovedToAnotherKeyFailsToOpen() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, _ throws in
            try store.set("admin-token", for: .apiToken)
            let other = SecretKey<String?>("guest.token")
            try store.set("guest-token", for: other)
            let eventLog = try store.eventLog
            try eventLog.environment.write { txn in
                let bytes = try #require(try txn.get(eventLog.dbs.secrets, key: Array("auth.token".utf8)))
                try txn.put(eventLog.dbs.secrets, key: Array("guest.token".utf8), value: bytes)
            }
            #expect(throws: ChronicleError.self) { try store.value(for: other) }
            #expect(store[.apiToken] == "admin-token")
        }
    }

    @Test func alteredSealedLogRecordBreaksTheKeyedChain() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, _ throws in
            try store.set("value", for: .apiToken)
            try store.set(.dark, for: .theme)
            let eventLog = try store.eventLog
            #expect(try eventLog.head().chainKeyID != nil)  // created with a key source: the chain is keyed
            // Record 1 keys the chain; re-date the first event and recompute an unkeyed chain hash: verify must still fail.
            try eventLog.environment.write { txn in
                let first = try #require(try txn.get(eventLog.dbs.events, key: UInt64(1).bigEndianBytes))
                #expect(try LogRecord(decoding: first, sequence: 1).kind == .chainKey)
                let bytes = try #require(try txn.get(eventLog.dbs.events, key: UInt64(2).bigEndianBytes))
                let record = try LogRecord(decoding: bytes, sequence: 2)
                var event = try record.event(sequence: 2)
                event.hlc = HLC(rawValue: event.hlc.rawValue + (1 << 30))
                let body = event.encoded()
                let hash = LogRecord.chainHash(previous: Array(first.suffix(LogRecord.hashLength)), sequence: 2, kind: .event, body: body, key: nil)
                try txn.put(eventLog.dbs.events, key: UInt64(2).bigEndianBytes, value: LogRecord(kind: .event, body: body, hash: hash).encoded())
            }
            let report = try store.verify()
            #expect(report.firstBadSequence == 2)
        }
    }

    @Test func passphraseChangeRewrapsOnly() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let store = try Store(directory: directory, configuration: passphraseConfiguration("old"))
            try store.set("value", for: .apiToken)
            let eventsBefore = try store.logEntries().count
            try store.changePassphrase(to: "new")
            #expect(try store.logEntries().count == eventsBefore)  // no event re-sealed
            #expect(store[.apiToken] == "value")
        }
        #expect(throws: ChronicleError.wrongKey) { _ = try Store(directory: directory, configuration: passphraseConfiguration("old")) }
        let store = try Store(directory: directory, configuration: passphraseConfiguration("new"))
        #expect(store[.apiToken] == "value")
    }

    @Test func rotationKeepsOldEventsReadable() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, directory throws in
            try store.set("one", for: .apiToken)
            try store.rotateDataKey()
            try store.set("two", for: .apiToken)
            try store.rotateDataKey(reseal: true)
            #expect(try store.history(of: .apiToken).map(\.value) == ["one", "two", "two"])
            let keyring = try store.crypto.get()
            #expect(try keyring.wrappedKeys().count == 3)
            #expect(try store.verify().isSound)
        }
    }

    /// Re-sealing used to read the live secrets in one transaction and write them in another:
    /// a set committed in between was overwritten by the value it replaced.
    @Test func resealNeverOverwritesAConcurrentSet() async throws {
        try await withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, _ async throws in
            let keys = (0..<40).map { SecretKey<String>("race.\($0)", default: "") }
            for key in keys { try store.set("0", for: key) }
            let rotating = Atomic<Bool>(true)
            let writer = Task.detached { () throws -> Int in
                var round = 0
                while rotating.load(ordering: .relaxed) || round < 20 {
                    round += 1
                    for key in keys { try store.set("\(round)", for: key) }
                }
                return round
            }
            for _ in 0..<20 { try store.rotateDataKey(reseal: true) }
            rotating.store(false, ordering: .relaxed)
            let last = try await writer.value
            for key in keys {
                #expect(try store.value(for: key) == "\(last)")
                // In log order a key's values never go back: a re-seal writes the value it read in the same transaction.
                let rounds = try store.history(of: key).compactMap { $0.value.flatMap(Int.init) }
                #expect(rounds == rounds.sorted(), "\(key.name) went back to an older value")
            }
            #expect(try store.verify().isSound)
        }
    }

    @Test func keyFileSourceAndPermissions() throws {
        let keyDirectory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: keyDirectory) }
        let keyFile = keyDirectory.appendingPathComponent("group.key")
        try KeyEncryptionKeys.createKeyFile(keyFile)
        let attributes = try FileManager.default.attributesOfItem(atPath: keyFile.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let directoryAttributes = try FileManager.default.attributesOfItem(atPath: keyDirectory.path)
        #expect((directoryAttributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)

        try withTemporaryStore(configuration: .init(keySource: .keyFile(keyFile))) { store, _ throws in
            try store.set("value", for: .apiToken)
            #expect(store[.apiToken] == "value")
        }
        let short = keyDirectory.appendingPathComponent("short.key")
        try Data([1, 2, 3]).write(to: short)
        let refused = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: refused) }
        #expect(throws: ChronicleError.self) { _ = try Store(directory: refused, configuration: .init(keySource: .keyFile(short))) }
        // A key file others can read, or a symbolic link to one, is refused with the fix in the message.
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: keyFile.path)
        #expect { _ = try Store(directory: refused, configuration: .init(keySource: .keyFile(keyFile))) } throws: { error in
            "\(error)".contains("chmod 600")
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile.path)
        let link = keyDirectory.appendingPathComponent("link.key")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: keyFile)
        #expect { _ = try Store(directory: refused, configuration: .init(keySource: .keyFile(link))) } throws: { error in
            "\(error)".contains("symbolic link")
        }
    }

    @Test func storeFilesArePrivate() throws {
        try withTemporaryStore { store, directory throws in
            store[.theme] = .dark
            let attributes = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("data.mdb").path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            let directoryAttributes = try FileManager.default.attributesOfItem(atPath: directory.path)
            #expect((directoryAttributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        }
    }

    @Test func keysExportAndImportBetweenReplicas() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("group")) { first, _ throws in
            try first.set("shared", for: .apiToken)
            let bundle = try first.exportDataKeys()
            #expect(bundle.range(of: Data("shared".utf8)) == nil)
            try withTemporaryStore(configuration: passphraseConfiguration("group")) { second, _ throws in
                #expect(try second.importDataKeys(bundle) == 1)
                #expect(try second.importDataKeys(bundle) == 0)  // idempotent
                // The second replica can now open the first one's sealed entry.
                let entry = try #require(try first.eventLog.entry(.secrets, "auth.token"))
                let plaintext = try second.openPayload(entry, key: Keys.apiToken)
                #expect(String(decoding: plaintext, as: UTF8.self) == "shared")
            }
            try withTemporaryStore(configuration: passphraseConfiguration("other")) { stranger, _ throws in
                #expect(throws: ChronicleError.wrongKey) { try stranger.importDataKeys(bundle) }
                #expect(throws: ChronicleError.self) { try stranger.importDataKeys(Data("garbage".utf8)) }
            }
        }
    }

    @Test func customKeyProvider() throws {
        struct Provider: KeyProvider {
            func keyEncryptionKey() throws -> [UInt8] { [UInt8](repeating: 42, count: 32) }
        }
        struct ShortProvider: KeyProvider {
            func keyEncryptionKey() throws -> [UInt8] { [1, 2, 3] }
        }
        try withTemporaryStore(configuration: .init(keySource: .provider(Provider()))) { store, _ throws in
            try store.set("v", for: .apiToken)
            #expect(store[.apiToken] == "v")
            #expect(throws: ChronicleError.self) { try store.changeKeySource(to: .provider(ShortProvider())) }
            #expect(store[.apiToken] == "v")
        }
    }

    /// A secret whose stored value no longer decodes as the key's type (an enum case renamed,
    /// a narrower integer, a changed struct) used to be quoted in the error and in the log line.
    @Test func aSecretThatFailsToDecodeIsNeverQuoted() throws {
        struct Credentials: Codable, Equatable { var user: Int; var token: Int }
        enum Level: String, Codable { case low, high }
        let marker = "SECRETMARKER\(UInt32.random(in: 100_000...999_999))"
        let number = Int64(40_000_000_000 + Int64.random(in: 0..<1_000))
        let handler = InMemoryLogHandler()
        var configuration = passphraseConfiguration("pw")
        configuration.logger = Logger(label: "test", factory: { _ in handler })
        try withTemporaryStore(configuration: configuration) { store, _ throws in
            try store.set(marker, for: SecretKey<String>("level", default: ""))
            try store.set(Int(number), for: SecretKey<Int>("narrow", default: 0))
            try store.set(["user": marker, "token": marker], for: SecretKey<[String: String]>("credentials", default: [:]))
            var errors: [ChronicleError] = []
            func attempt<V>(_ key: SecretKey<V>) {
                let result = Result { () throws(ChronicleError) -> V in try store.value(for: key) }
                if case let .failure(error) = result { errors.append(error) }
            }
            attempt(SecretKey<Level>("level", default: .low))
            attempt(SecretKey<Int16>("narrow", default: 0))
            attempt(SecretKey<Credentials>("credentials", default: .init(user: 0, token: 0)))
            attempt(SecretKey<[String: Int]>("credentials", default: [:]))
            #expect(errors.count == 4)
            // The non-throwing reads log the same errors.
            _ = store[SecretKey<Level>("level", default: .low)]
            _ = store[SecretKey<Int16>("narrow", default: 0)]
            _ = store[SecretKey<Credentials>("credentials", default: .init(user: 0, token: 0))]
            let texts = errors.map { "\($0) \(String(reflecting: $0))" } + handler.entries.map { "\($0.message) \($0.metadata) \($0.error.map { String(describing: $0) } ?? "")" }
            #expect(handler.entries.count >= 3)
            for text in texts {
                #expect(!text.contains(marker), "a secret in: \(text)")
                #expect(!text.contains(String(number)), "a secret number in: \(text)")
            }
        }
    }

    /// The passphrase used to stay a plain string in the public configuration, printable with
    /// `print` or `dump`, and the old one was kept after a change.
    @Test func thePassphraseNeverPrintsAndIsNotKept() throws {
        let passphrase = "PASSPHRASE-\(UUID().uuidString)"
        var configuration = passphraseConfiguration(passphrase)
        func rendered(_ value: Any) -> String {
            var dumped = ""
            dump(value, to: &dumped)
            return "\(value) \(String(reflecting: value)) \(dumped)"
        }
        #expect(!rendered(configuration).contains(passphrase))
        #expect(!rendered(KeySource.passphrase(passphrase)).contains(passphrase))
        try withTemporaryStore(configuration: configuration) { store, directory throws in
            try store.set("value", for: .apiToken)
            #expect(!rendered(store.configuration).contains(passphrase))
            // Not only hidden: gone. The open store keeps no passphrase string.
            guard case let .passphrase(kept) = store.configuration.keySource else { Issue.record("no key source"); return }
            #expect(kept != passphrase)
            // Copies still open (the keyring's secure copy is used), and reusing the configuration says what to do.
            let target = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: target) }
            let copy = try store.copy(to: target)
            #expect(copy[.apiToken] == "value")
            #expect { _ = try Store(directory: directory, configuration: store.configuration) } throws: { error in
                "\(error)".contains("give the passphrase again")
            }
        }
        configuration.keySource = .keyFile(URL(fileURLWithPath: "/tmp/group.key"))
        #expect(rendered(configuration).contains("/tmp/group.key"))
    }

    /// The wipe in `seal` used to zero a copy-on-write copy: the plaintext's own storage,
    /// shared with the caller's copies, lived on.
    @Test func thePlaintextStorageIsWipedOnceCommitted() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, _ throws in
            let keyring = try store.crypto.get()
            let plaintext: [UInt8] = Array("PLAINTEXT-\(UUID().uuidString)".utf8)
            let change = PendingChange(
                domain: .secrets, key: "wipe.me", policy: .never, op: .set, encoding: ValueEncoding.string.rawValue, payload: plaintext,
                sealer: keyring)
            try store.commit([change])
            #expect(plaintext.allSatisfy { $0 == 0 })  // the storage every copy shares, not a copy of it
            #expect(try store.value(for: SecretKey<String>("wipe.me", default: "")).hasPrefix("PLAINTEXT-"))
        }
    }

    /// An out-of-range cost used to make a store whose own key could not be unwrapped again.
    @Test func anOutOfRangeKeyDerivationCostIsRefused() throws {
        for cost in [KeyDerivationCost(passes: 0, memoryBytes: 64 << 20), KeyDerivationCost(passes: 2, memoryBytes: 1024),
                     KeyDerivationCost(passes: 100, memoryBytes: 64 << 20), KeyDerivationCost(passes: 4, memoryBytes: 8 << 30)] {
            var configuration = Store.Configuration(keySource: .passphrase("pw"))
            configuration.keyDerivationCost = cost
            let directory = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            #expect { _ = try Store(directory: directory, configuration: configuration) } throws: { error in
                "\(error)".contains("key derivation cost")
            }
            #expect(!FileManager.default.fileExists(atPath: directory.path))  // nothing created
        }
    }

    @Test func secretsAreRedactedInDescriptionsErrorsAndLogs() throws {
        let marker = "REDACT-ME-\(UUID().uuidString)"
        let handler = InMemoryLogHandler()
        var configuration = passphraseConfiguration("pw")
        configuration.logger = Logger(label: "test") { _ in handler }
        try withTemporaryStore(configuration: configuration) { store, _ throws in
            try store.set(marker, for: .apiToken)
            let revision = try #require(try store.history(of: .apiToken).first)
            #expect(!revision.description.contains(marker))
            #expect(!String(describing: revision).contains(marker))
            #expect(!Keys.apiToken.description.contains(marker))
            // Make the secret unreadable, read it through the logging API, and check what was logged.
            let eventLog = try store.eventLog
            try eventLog.environment.write { txn in
                var bytes = try #require(try txn.get(eventLog.dbs.secrets, key: Array("auth.token".utf8)))
                bytes[bytes.count - 17] ^= 0xFF  // the sealed payload's last byte (the replica id follows it)
                try txn.put(eventLog.dbs.secrets, key: Array("auth.token".utf8), value: bytes)
            }
            #expect(store[.apiToken] == nil)
            do {
                _ = try store.value(for: .apiToken)
            } catch {
                #expect(!String(describing: error).contains(marker))
            }
            let lines = handler.entries.map { "\($0.message) \($0.metadata) \($0.error.map { String(describing: $0) } ?? "")" }
            #expect(!lines.isEmpty)
            #expect(lines.allSatisfy { !$0.contains(marker) })
            #expect(try store.logEntries().allSatisfy { ($0.valueJSON ?? "").contains(marker) == false })
        }
    }
}
