@testable import Chronicle
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleTesting
import Foundation
import Testing

/// Once a store has a data key its chain is keyed, and no edit of `meta` or re-chaining of the
/// log without the key makes it pass `verify` again.
struct TamperEvidenceTests {
    private static let copiedKey = Key<Int>("copied.value", default: 0, sync: .manual)

    /// Runs `body` with a keyed store that wrote 7 to ``copiedKey`` and was then copied to
    /// another directory (a new data file, as a restored backup has), opened from the copy.
    private func withCopiedKeyedStore(_ body: (Store) throws -> Void) throws {
        let original = temporaryDirectory()
        let copy = temporaryDirectory()
        defer {
            try? FileManager.default.removeItem(at: original)
            try? FileManager.default.removeItem(at: copy)
        }
        let configuration = passphraseConfiguration("copied")
        do {
            let store = try Store(directory: original, configuration: configuration)
            try store.set(7, for: Self.copiedKey)
            #expect(try store.verify().isSound)
        }
        try? FileManager.default.removeItem(at: copy)
        try FileManager.default.copyItem(at: original, to: copy)
        try body(try Store(directory: copy, configuration: configuration))
    }

    /// A copy of a keyed store (another directory, or a backup restored to another file) gets a new
    /// epoch when it opens, and the head MAC covers the epoch: the copy must still verify before
    /// it writes anything.
    @Test func aCopiedKeyedStoreVerifiesBeforeItsFirstWrite() throws {
        try withCopiedKeyedStore { copied in
            #expect(copied[Self.copiedKey] == 7)
            let report = try copied.verify()
            #expect(report.isSound, "\(report)")
            // Its first write makes a MAC over its own epoch.
            try copied.set(8, for: Self.copiedKey)
            #expect(try copied.verify().isSound)
            let eventLog = try copied.eventLog
            #expect(try eventLog.environment.read { txn in try txn.get(eventLog.dbs.meta, key: MetaKey.macEpoch) } == nil)
        }
    }

    /// The epoch a copy keeps for its MAC does not let an edited head pass.
    @Test func aCopiedKeyedStoreWithAnEditedHeadFailsVerify() throws {
        try withCopiedKeyedStore { copied in
            let eventLog = try copied.eventLog
            try eventLog.environment.write { txn in
                try txn.put(eventLog.dbs.meta, key: MetaKey.chain, value: [UInt8](repeating: 7, count: 32))
            }
            #expect(try !copied.verify().isSound)
        }
    }

    @Test func aStoreKeyedAfterItsFirstEventsHasAKeyedChain() throws {
        // No key source: the data key comes from the default key file with the first secret.
        try withTemporaryStore { store, directory in
            store[.theme] = .dark
            try store.set("s3cr3t", for: .apiToken)
            store[.theme] = .light
            #expect(try store.eventLog.head().chainKeyID != nil)
            #expect(try store.verify().isSound)
            let reopened = try Store(directory: directory)
            #expect(try reopened.verify().isSound)
        }
    }

    @Test func aDowngradedAndRechainedLogFailsVerify() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, _ in
            store[.theme] = .dark
            try store.set("s3cr3t", for: .apiToken)
            try rechainWithoutKey(store) { events in
                // The forger also changes a value on the way.
                if let index = events.firstIndex(where: { $0.key == Keys.theme.name }) { events[index].payload = Array("light".utf8) }
            }
            let report = try store.verify()
            #expect(!report.isSound)  // the edited event's authenticator, or the unkeyed chain, gives it away
            #expect(report.firstProblem != nil)
        }
    }

    @Test func aCutTailWithAMatchingHeadFailsVerify() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, _ in
            for value in ["a", "b", "c"] { try store.set(value, for: .apiToken) }
            let eventLog = try store.eventLog
            // Delete the last record and point the head at the one before, without the key.
            try eventLog.environment.write { txn in
                var head = try LogHead.read(txn, eventLog.dbs)
                try txn.delete(eventLog.dbs.events, key: head.sequence.bigEndianBytes)
                head.sequence -= 1
                let last = try #require(try txn.get(eventLog.dbs.events, key: head.sequence.bigEndianBytes))
                head.chain = Array(last.suffix(LogRecord.hashLength))
                try txn.put(eventLog.dbs.meta, key: MetaKey.sequence, value: head.sequence.bigEndianBytes)
                try txn.put(eventLog.dbs.meta, key: MetaKey.chain, value: head.chain)
            }
            let report = try store.verify()
            #expect(report.firstProblem.map { "\($0)" }?.contains("head.mac") == true)
        }
    }

    /// The tail cut as above, then the app writes: the write must refuse the edited head, not
    /// sign it with a new MAC that makes the cut log verify.
    @Test func aWriteRefusesAnEditedHeadInsteadOfResigningIt() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, _ in
            for value in ["a", "b", "c"] { try store.set(value, for: .apiToken) }
            let eventLog = try store.eventLog
            try eventLog.environment.write { txn in
                var head = try LogHead.read(txn, eventLog.dbs)
                try txn.delete(eventLog.dbs.events, key: head.sequence.bigEndianBytes)
                head.sequence -= 1
                let last = try #require(try txn.get(eventLog.dbs.events, key: head.sequence.bigEndianBytes))
                try txn.put(eventLog.dbs.meta, key: MetaKey.sequence, value: head.sequence.bigEndianBytes)
                try txn.put(eventLog.dbs.meta, key: MetaKey.chain, value: Array(last.suffix(LogRecord.hashLength)))
            }
            #expect {
                try store.set("d", for: .apiToken)
            } throws: { error in
                "\(error)".contains("head.mac")
            }
            #expect(try !store.verify().isSound)
        }
    }

    /// A head whose chain hash is not the log's last record's fails verify, keyed or not (an
    /// unkeyed head has no MAC to catch it).
    @Test func aHeadWithAnotherChainHashFailsVerify() throws {
        try withTemporaryStore { store, _ in
            for index in 0..<3 { try store.set(index, for: Key<Int>("plain.k\(index)", default: 0)) }
            #expect(try store.verify().isSound)
            let eventLog = try store.eventLog
            try eventLog.environment.write { txn in
                try txn.put(eventLog.dbs.meta, key: MetaKey.chain, value: [UInt8](repeating: 9, count: LogRecord.hashLength))
            }
            let report = try store.verify()
            #expect(!report.isSound)
            #expect(report.firstProblem.map { "\($0)" }?.contains("\"chain\"") == true)
        }
    }

    /// A store written by format 1 that got its key after its first events (every
    /// `Store.standard` with a secret) has an unkeyed chain: this version keys it from its
    /// first opening on, and the store verifies.
    @Test func aFormat1StoreKeyedAfterItsFirstEventsIsUpgradedAndVerifies() throws {
        try withTemporaryStore { store, directory in
            store[.theme] = .dark
            try store.set("s3cr3t", for: .apiToken)
            try rechainWithoutKey(store)  // what format 1 left on disk: an unkeyed chain, a data key
            try backdateActiveKey(store)  // made by a build of format 1
            try store.rebuildViews()
            let reopened = try Store(directory: directory)
            #expect(try reopened.eventLog.head().chainKeyID != nil)
            #expect(try reopened.verify().isSound)
            #expect(try reopened.value(for: .apiToken) == "s3cr3t")
        }
    }

    /// With the files and no key: strip every authenticator, change a value, re-chain unkeyed, and
    /// delete `dk.active`, `chain.key`, `chain.inlog` and `head.mac`. The store still holds its own
    /// wrapped key, so opening it with its key source says the store is damaged, and never mints a
    /// new key over the forgery.
    @Test func aMemberStoreRechainedWithoutAuthenticatorsRefusesToOpen() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let store = try Store(directory: directory, configuration: passphraseConfiguration("pw"))
            try store.set("dark", for: .groupTheme)
            try store.set(.light, for: .theme)
            try rechainWithoutKey(store, alsoDeleting: [MetaKey.activeKey]) { events in
                for index in events.indices { events[index].authenticator = nil }
                if let index = events.firstIndex(where: { $0.key == Keys.groupTheme.name }) { events[index].payload = Array("forged".utf8) }
            }
            try store.rebuildViews()
        }
        do {
            _ = try Store(directory: directory, configuration: passphraseConfiguration("pw"))
            Issue.record("a member store without its active key opened, and minted a new key over a forgery")
        } catch {
            // With the chain-key record gone too, the store cannot be told from a relay that
            // received the group's key records: refused either way, and the message says both.
            guard case let .invalidArgument(reason) = error else {
                Issue.record("unexpected error: \(error)")
                return
            }
            #expect(reason.contains("new directory") && reason.contains("chronicle verify") && reason.contains("rewritten without the key"))
        }
        // Nothing was written: the forged store is as the forger left it.
        let inspected = try Store(directory: directory)  // opened without the key: reads plain values, mints nothing
        #expect(try inspected.eventLog.keyRecords.activeAndChainKeyIDs().active == nil)
    }

    /// Once a replica's events carry authenticators, a later one without is reported by `verify`:
    /// a member authenticates every event it writes, so the authenticator was stripped.
    @Test func aStrippedAuthenticatorAfterAuthenticatedEventsFailsVerify() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, _ in
            try store.set("dark", for: .groupTheme)
            try store.set("light", for: .groupTheme)
            #expect(try store.verify().isSound)
            var seen = 0
            try rewriteWithChainKey(store) { event in
                seen += 1
                if seen == 2 { event.authenticator = nil }
            }
            let report = try store.verify()
            #expect(!report.isSound)
            #expect(report.firstProblem?.description.contains("carries no authenticator") == true)
        }
    }
}
