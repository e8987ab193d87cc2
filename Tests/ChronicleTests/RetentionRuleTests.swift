@testable import Chronicle
@testable import ChronicleFormat
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleTesting
import Foundation
import Testing

/// A key's retention rule as writers see it: remembered between transactions, and still the
/// one on disk when another process changed it.
struct RetentionRuleTests {
    /// This process remembers the key's rule (3) after its writes; another process then writes
    /// the key declaring 50. This process's next write declares 3 again and must write it: a
    /// remembered 3 that skipped the write would leave the other process's 50 in force.
    @Test func aRuleAnotherProcessChangedIsReadAgain() async throws {
        try await withTemporaryStore { store, directory in
            let key = Key<Int>("shared.kept", default: 0, retention: .revisions(3))
            for value in 1...10 { try store.set(value, for: key) }
            #expect(try store.history(of: key).count == 3)
            let child = try await runChild(["set-kept", directory.path, "shared.kept", "50"])
            #expect(child.status == 0, "\(child.stderr)")
            let row = { try store.eventLog.environment.read { txn in
                try txn.get(store.eventLog.dbs.retention, key: HistoryKey.prefix(domain: .defaults, name: "shared.kept")).flatMap { UInt32(bigEndianBytes: $0) }
            } }
            #expect(try row() == 50, "the other process's rule is in force")
            try store.set(12, for: key)
            #expect(try store.history(of: key).count == 3)
            #expect(try row() == 3)
        }
    }

    /// A rule a transaction wrote is forgotten when the transaction does not commit: the next
    /// write reads the row again (the token it remembered is not the one on disk).
    @Test func aRuleFromATransactionThatFailedIsNotRemembered() throws {
        try withTemporaryStore { store, _ in
            let three = Key<Int>("failed.kept", default: 0, retention: .revisions(3))
            let seven = Key<Int>("failed.kept", default: 0, retention: .revisions(7))
            for value in 1...10 { try store.set(value, for: three) }
            // A batch whose first change declares 7 and whose second fails inside the transaction.
            let guarded = Key<Int>("failed.guard", default: 0)
            try store.set(1, for: guarded)
            let stale = try #require(store.eventLog.environment.read { txn in
                try txn.get(store.eventLog.dbs.view(.defaults), key: Array("failed.guard".utf8)).map { try ViewEntry.decoding($0, key: "failed.guard").order }
            })
            try store.set(2, for: guarded)  // the order the batch expects is gone
            #expect(throws: (any Error).self) {
                try store.eventLog.commit([
                    PendingChange(domain: .defaults, key: "failed.kept", policy: .never, op: .set, encoding: 0, payload: [11], retention: .some(.revisions(7))),
                    PendingChange(domain: .defaults, key: "failed.guard", policy: .never, op: .set, encoding: 0, payload: [3], expectedOrder: .some(stale)),
                ])
            }
            // Still 3 on disk; a write declaring 7 must write it (a remembered 7 would skip it).
            try store.set(11, for: seven)
            #expect(try store.history(of: seven).count == 7)
        }
    }
}
