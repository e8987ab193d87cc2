@testable import ChronicleLog
import Testing

/// The automatic compaction's schedule: when a pass is due and which keys it looks at, told of
/// each write transaction's records at once.
struct SweepScheduleTests {
    static func prefix(_ name: String) -> [UInt8] { [0, UInt8(name.utf8.count)] + Array(name.utf8) }

    /// A pass is due after `threshold` records, and looks at each key written since (a key
    /// written many times is looked at once, by the sweep, which merges the list).
    @Test func aPassIsDueAfterTheThresholdAndLooksAtTheKeysWritten() {
        var schedule = SweepSchedule()
        schedule.appended(Array(repeating: Self.prefix("hot"), count: SweepSchedule.threshold - 2) + [Self.prefix("cold")])
        #expect(!schedule.isDue)
        schedule.appended([Self.prefix("hot")])
        #expect(schedule.isDue)
        guard case let .keys(keys) = schedule.start() else {
            Issue.record("a pass over every key, not the keys written")
            return
        }
        #expect(Set(keys) == [Self.prefix("hot"), Self.prefix("cold")])
        #expect(!schedule.isDue, "a pass runs")
        #expect(schedule.start() == nil)
        schedule.finish()
        #expect(!schedule.isDue, "nothing written since")
    }

    /// One hot key written far more often than the cap on remembered keys stays one key: the
    /// list merges its duplicates when it grows past the cap instead of giving up on keys.
    @Test func aHotKeyNeverTurnsAPassIntoOneOverEveryKey() {
        var schedule = SweepSchedule()
        let hot = Array(repeating: Self.prefix("hot"), count: 1_000)
        for _ in 0..<(3 * SweepSchedule.maxDirtyKeys / 1_000) { schedule.appended(hot) }
        guard case let .keys(keys) = schedule.start() else {
            Issue.record("a pass over every key for one hot key")
            return
        }
        #expect(Set(keys) == [Self.prefix("hot")])
        #expect(keys.count <= SweepSchedule.maxDirtyKeys, "the list holds \(keys.count) entries")
    }

    /// More distinct keys than the cap: the next pass looks at every key (the list is dropped).
    @Test func tooManyDistinctKeysMakeAPassOverEveryKey() {
        var schedule = SweepSchedule()
        schedule.appended((0...SweepSchedule.maxDirtyKeys).map { Self.prefix("k\($0)") })
        #expect(schedule.start() == .everyKey)
    }

    /// Over half the cap of distinct keys even after merging duplicates: a pass over every key,
    /// rather than merging again at every small transaction.
    @Test func aListStillLongAfterMergingBecomesAPassOverEveryKey() {
        var schedule = SweepSchedule()
        schedule.appended((0..<(SweepSchedule.maxDirtyKeys / 2 + 1)).map { Self.prefix("k\($0)") })
        schedule.appended(Array(repeating: Self.prefix("hot"), count: SweepSchedule.maxDirtyKeys))
        #expect(schedule.start() == .everyKey)
    }

    /// A transaction that appended more records than it listed (a compaction's rewrite, a large
    /// import) makes the next pass look at every key; its records count towards the threshold.
    @Test func recordsBeyondTheListMakeAPassOverEveryKey() {
        var schedule = SweepSchedule()
        schedule.appended([Self.prefix("a")], beyond: SweepSchedule.threshold)
        #expect(schedule.isDue)
        #expect(schedule.start() == .everyKey)
    }

    /// Keys a pass could not finish are looked at by the next one; a closing log starts none.
    @Test func unfinishedKeysComeBackAndAClosingLogStartsNoPass() {
        var schedule = SweepSchedule()
        schedule.appended(Array(repeating: Self.prefix("a"), count: SweepSchedule.threshold))
        _ = schedule.start()
        schedule.finish(unfinished: [Self.prefix("a")])
        schedule.appended(Array(repeating: Self.prefix("b"), count: SweepSchedule.threshold))
        guard case let .keys(keys) = schedule.start() else {
            Issue.record("a pass over every key")
            return
        }
        #expect(Set(keys) == [Self.prefix("a"), Self.prefix("b")])
        schedule.finish()
        schedule.stop()
        schedule.appended(Array(repeating: Self.prefix("c"), count: SweepSchedule.threshold))
        #expect(!schedule.isDue)
    }

    /// What a pass counted is remembered per key for the next pass (which then walks only the
    /// records appended since), replaced by a newer count, forgotten when a key holds nothing,
    /// and forgotten whole when the log's epoch changes (a compaction renumbered it).
    @Test func countsAreRememberedPerKeyAndForgottenWithTheirEpoch() {
        var schedule = SweepSchedule()
        let (a, b, c) = (Self.prefix("a"), Self.prefix("b"), Self.prefix("c"))
        let (one, two): ([UInt8], [UInt8]) = ([1], [2])
        #expect(schedule.revisionCounts([a, b], epoch: one) == [nil, nil], "nothing counted yet")
        schedule.found([(a, RevisionCount(latest: 10, count: 3)), (b, RevisionCount(latest: 12, count: 100)), (c, nil)], epoch: one)
        #expect(schedule.revisionCounts([a, c], epoch: one) == [RevisionCount(latest: 10, count: 3), nil])
        schedule.found([(a, RevisionCount(latest: 20, count: 4)), (b, nil)], epoch: one)
        #expect(schedule.revisionCounts([a, b], epoch: one) == [RevisionCount(latest: 20, count: 4), nil])
        #expect(schedule.revisionCounts([a, b], epoch: two) == [nil, nil], "counts of another epoch")
        schedule.found([(c, RevisionCount(latest: 5, count: 1))], epoch: two)
        #expect(schedule.revisionCounts([a, c], epoch: two) == [nil, RevisionCount(latest: 5, count: 1)], "the old epoch's counts are gone")
    }

    /// At most ``SweepSchedule/maxDirtyKeys`` counts are remembered: past it a new key is not
    /// (its next pass walks it whole, the cost before counts), and a remembered one still updates.
    @Test func rememberedCountsAreBounded() {
        var schedule = SweepSchedule()
        let epoch: [UInt8] = [1]
        let prefixes = (0...SweepSchedule.maxDirtyKeys).map { Self.prefix("k\($0)") }
        schedule.found(prefixes.map { ($0, RevisionCount(latest: 1, count: 1)) }, epoch: epoch)
        let (first, last) = (prefixes[0], prefixes[SweepSchedule.maxDirtyKeys])
        #expect(schedule.revisionCounts([first, last], epoch: epoch) == [RevisionCount(latest: 1, count: 1), nil])
        schedule.found([(first, RevisionCount(latest: 9, count: 2))], epoch: epoch)
        #expect(schedule.revisionCounts([first], epoch: epoch) == [RevisionCount(latest: 9, count: 2)])
    }
}
