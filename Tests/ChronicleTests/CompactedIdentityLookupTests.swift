@testable import Chronicle
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleSodium
import ChronicleTesting
import Foundation
import Testing

/// Looking up an identity in the compacted ranges of `dots` (FORMAT.md section 2): the ranges
/// of an origin are found past rows of other kinds that share their first bytes and past damaged
/// rows, and a lookup passes over a bounded number of such rows.
struct CompactedIdentityLookupTests {
    /// An origin whose 16th byte is 0, and the origin whose identity rows begin with the same 17
    /// bytes as its range keys: `R`, then its first 15 bytes.
    func origins() throws -> (origin: ReplicaID, shadow: ReplicaID) {
        let random = Sodium.randomBytes(15)
        let origin = try #require(ReplicaID(bytes: random + [0]))
        let shadow = try #require(ReplicaID(bytes: [CompactedIdentities.tag] + random))
        return (origin, shadow)
    }

    func withDots(_ body: (EventLog) throws -> Void) throws {
        try withTemporaryStore { store, _ in try body(try store.eventLog) }
    }

    @Test func identityRowsSharingARangeKeysBytesDoNotHideTheRange() throws {
        try withDots { eventLog in
            let (origin, shadow) = try origins()
            try eventLog.environment.write { txn throws in
                // The row of `shadow` at counter 3 sorts like a range ending at 768..1023: between
                // the seek key `R‖origin‖599` and `R‖origin‖1000`. Counter 4's sorts after both.
                for counter in [UInt64(3), 4] { try txn.put(eventLog.dbs.dots, key: shadow.bytes.appendingBigEndian(counter), value: UInt64(1).bigEndianBytes) }
                try txn.put(eventLog.dbs.dots, key: CompactedIdentities.key(origin: origin, last: 1_000), value: UInt64(600).bigEndianBytes)
            }
            try eventLog.environment.read { txn throws in
                #expect(try CompactedIdentities.contains(origin: origin, counter: 650, txn, eventLog.dbs))
                #expect(try !CompactedIdentities.contains(origin: origin, counter: 599, txn, eventLog.dbs))
                #expect(try CompactedIdentities.next(origin: origin, after: 598, txn, eventLog.dbs) == 600...1_000)
            }
        }
    }

    @Test func damagedRangeRowsArePassedOver() throws {
        try withDots { eventLog in
            let origin = ReplicaID.random()
            try eventLog.environment.write { txn throws in
                try txn.put(eventLog.dbs.dots, key: CompactedIdentities.key(origin: origin, last: 10), value: [0, 0, 0, 0, 0, 0, 2])  // 7 bytes
                try txn.put(eventLog.dbs.dots, key: CompactedIdentities.key(origin: origin, last: 15), value: UInt64(20).bigEndianBytes)  // first past last
                try txn.put(eventLog.dbs.dots, key: CompactedIdentities.key(origin: origin, last: 30), value: UInt64(25).bigEndianBytes)
            }
            try eventLog.environment.read { txn throws in
                #expect(try CompactedIdentities.next(origin: origin, after: 1, txn, eventLog.dbs) == 25...30)
                #expect(try !CompactedIdentities.contains(origin: origin, counter: 12, txn, eventLog.dbs))
                #expect(try CompactedIdentities.contains(origin: origin, counter: 26, txn, eventLog.dbs))
            }
        }
    }

    /// Past the bound, the lookup stops: planted rows cost a bounded walk, not one per row.
    @Test func aLookupPassesOverABoundedNumberOfRows() throws {
        try withDots { eventLog in
            let (origin, shadow) = try origins()
            try eventLog.environment.write { txn throws in
                for counter in 1...UInt64(CompactedIdentities.maxKeysPassedOver + 10) {
                    try txn.put(eventLog.dbs.dots, key: shadow.bytes.appendingBigEndian(counter), value: UInt64(1).bigEndianBytes)
                }
                try txn.put(eventLog.dbs.dots, key: CompactedIdentities.key(origin: origin, last: 1 << 20), value: UInt64(1).bigEndianBytes)
            }
            try eventLog.environment.read { txn throws in
                #expect(try CompactedIdentities.next(origin: origin, after: 0, txn, eventLog.dbs) == nil)
                // From past the planted rows' place, the range is found.
                #expect(try CompactedIdentities.next(origin: origin, after: 1 << 19, txn, eventLog.dbs) == (1 << 19) + 1...(1 << 20))
            }
        }
    }
}
