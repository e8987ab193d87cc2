@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Synchronization
import Testing

/// What the automatic compaction costs a store whose keys are written in batches: counted as
/// the history links its passes read, never timed.
struct AutomaticCompactionCostTests {
    static let keys = (0..<300).map { Key<Int>("cost.k\($0)", default: 0, retention: .revisions(100)) }

    /// Writes every key once per transaction (300 records: a pass is due after each) and waits
    /// for the pass each transaction started.
    func writeRounds(_ store: Store, _ rounds: Range<Int>) throws {
        let eventLog = try store.eventLog
        for round in rounds {
            try store.write { batch in for (index, key) in Self.keys.enumerated() { batch[key] = round * 1_000 + index } }
            eventLog.sweeper.waitForPasses()
        }
    }

    /// A pass counts a key's records to know whether it is past its retention. It used to walk
    /// every link of every key written since the last pass, so keys written in batches cost each
    /// pass their whole history: 60 rounds of 300 keys read about 300 × (1 + … + 60) = 549,000
    /// links. It now starts from what the last pass counted, and reads one link a key a pass.
    @Test func aPassWalksOnlyTheRecordsAppendedSinceTheLast() throws {
        try withTemporaryStore { store, _ in
            let eventLog = try store.eventLog
            try writeRounds(store, 0..<1)
            let before = eventLog.retention.linksWalked.load(ordering: .relaxed)
            try writeRounds(store, 1..<60)
            let walked = eventLog.retention.linksWalked.load(ordering: .relaxed) - before
            #expect(walked <= 2 * Self.keys.count * 59, "59 passes over 300 keys read \(walked) history links")
            // Under their limit, nothing was dropped: the log holds every record (counted raw,
            // not through history(of:), which shows what retention keeps whatever the file holds).
            #expect(try recordKinds(store).events == 60 * Self.keys.count)
            // Past their retention, the passes keep each key at exactly what it keeps.
            try writeRounds(store, 60..<130)
            #expect(try recordKinds(store).events == 100 * Self.keys.count)
            #expect(store[Self.keys[7]] == 129_007)
            #expect(try store.verify().isSound)
        }
    }

    /// A compaction renumbers the log under a new epoch between passes: the passes after it
    /// still keep each key at exactly what it keeps, counted raw. (That the remembered counts are
    /// forgotten with their epoch is SweepScheduleTests'; here the renumbering lands no key's
    /// new record on its remembered one, so this shows the passes, not the epoch's check.)
    @Test func passesAfterACompactionKeepEachKeyAtItsRetention() throws {
        try withTemporaryStore { store, _ in
            let filler = Key<Int>("cost.filler", default: 0, retention: .forever)
            try store.write { batch in for value in 0..<300 { batch[filler] = value } }
            let cutoff = Date()
            Thread.sleep(forTimeInterval: 0.01)  // the keys' revisions are newer than the cutoff (their clock is the wall's)
            try writeRounds(store, 0..<60)
            // The filler's old revisions go; the keys' 60 stay, renumbered.
            let report = try store.compact(before: cutoff)
            #expect(report.dropped == 299)
            #expect(try store.history(of: Self.keys[0]).count == 60)
            #expect(try recordKinds(store).events == 1 + 60 * Self.keys.count)
            try writeRounds(store, 60..<130)
            #expect(try recordKinds(store).events == 1 + 100 * Self.keys.count)
            #expect(try store.verify().isSound)
        }
    }
}
