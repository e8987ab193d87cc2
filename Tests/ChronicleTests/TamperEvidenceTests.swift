@testable import Chronicle
import ChronicleLMDB
import ChronicleTesting
import Foundation
import Testing

/// Once a store has a data key its chain is keyed, and no edit of `meta` or re-chaining of the
/// log without the key makes it pass `verify` again.
struct TamperEvidenceTests {
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

    /// A store written by format 1 that got its key after its first events (every
    /// `Store.standard` with a secret) has an unkeyed chain: this version keys it from its
    /// first opening on, and the store verifies.
    @Test func aFormat1StoreKeyedAfterItsFirstEventsIsUpgradedAndVerifies() throws {
        try withTemporaryStore { store, directory in
            store[.theme] = .dark
            try store.set("s3cr3t", for: .apiToken)
            try rechainWithoutKey(store)  // what format 1 left on disk: an unkeyed chain, a data key
            try store.rebuildViews()
            let reopened = try Store(directory: directory)
            #expect(try reopened.eventLog.head().chainKeyID != nil)
            #expect(try reopened.verify().isSound)
            #expect(try reopened.value(for: .apiToken) == "s3cr3t")
        }
    }
}
