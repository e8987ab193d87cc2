@testable import Chronicle
@testable import ChronicleLog
import ChronicleFormat
import ChronicleLMDB
import ChronicleTesting
import Foundation
import Testing

/// The index behind `history(of:)`: one row per key naming its latest record (`latest`), and one
/// row per record naming the same key's record before it (`previous`). A write adds a row at the
/// end of `previous` and rewrites its key's row in `latest`, so what a commit of many keys touches
/// does not grow with how long their histories are.
struct HistoryIndexTests {

    /// Rows of a database by name (opened, not created, by the build under test).
    static func rows(_ store: Store, _ name: String) throws -> [(key: [UInt8], value: [UInt8])] {
        let log = try store.eventLog
        let database = try log.environment.openDatabase(named: name)
        return try log.environment.read { txn in
            var rows: [(key: [UInt8], value: [UInt8])] = []
            try txn.scan(database) { key, value in
                rows.append((key, value))
                return true
            }
            return rows
        }
    }

    /// Makes the index what a build before it left: the `history` rows of every event (or of
    /// `only` these sequences), `latest` and `previous` as `keep` says.
    static func indexAsAnEarlierBuild(_ store: Store, only: Set<UInt64>? = nil, keep: (inout [[UInt8]: UInt64]) -> Void = { $0 = [:] }) throws {
        let log = try store.eventLog
        let environment = log.environment
        let legacy = try environment.openDatabase(named: "history")
        let latest = try environment.openDatabase(named: "latest")
        let previous = try environment.openDatabase(named: "previous")
        var events: [(UInt64, Event)] = []
        try environment.read { txn in
            _ = try log.replayer.replayLog(txn) { sequence, event in events.append((sequence, event)) }
        }
        try environment.write { txn in
            var heads: [[UInt8]: UInt64] = [:]
            for (sequence, event) in events {
                let prefix = HistoryKey.prefix(domain: event.domain, name: event.key)
                if only?.contains(sequence) ?? true { try txn.put(legacy, key: prefix + sequence.bigEndianBytes, value: []) }
                if only?.contains(sequence) == false { heads[prefix] = sequence }
            }
            keep(&heads)
            try txn.clear(latest)
            for (prefix, sequence) in heads { try txn.put(latest, key: prefix, value: sequence.bigEndianBytes) }
            var kept: [(UInt64, UInt64)] = []
            try txn.scan(previous) { key, value in
                if let sequence = UInt64(bigEndianBytes: key), let before = UInt64(bigEndianBytes: value), !(only?.contains(sequence) ?? true) {
                    kept.append((sequence, before))
                }
                return true
            }
            try txn.clear(previous)
            for (sequence, before) in kept { try txn.put(previous, key: sequence.bigEndianBytes, value: before.bigEndianBytes) }
        }
    }

    @Test func theIndexKeepsOneRowPerKeyHoweverLongItsHistory() throws {
        try withTemporaryStore { store, _ throws in
            let keys = (0..<5).map { Key<Int>("history.k\($0)", default: 0) }
            for round in 1...20 { try store.write { batch in for key in keys { batch[key] = round } } }
            #expect(try Self.rows(store, "latest").count == 5)
            #expect(try Self.rows(store, "previous").count == 95)  // every record but each key's first
            #expect(try Self.rows(store, "history").isEmpty)
            for key in keys { #expect(try store.history(of: key).map(\.value) == Array(1...20)) }
        }
    }

    @Test func aStoreIndexedByAnEarlierBuildIsReindexedWhenItOpens() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let store = try Store(directory: directory)
            for theme in [Theme.dark, .light, .dark] { try store.set(theme, for: Keys.theme) }
            try store.set(1, for: Keys.launches)
            try store.remove(Keys.launches)
            try Self.indexAsAnEarlierBuild(store)
        }
        let store = try Store(directory: directory)
        #expect(try store.history(of: Keys.theme).map(\.value) == [.dark, .light, .dark])
        #expect(try store.history(of: Keys.launches).map(\.value) == [1, nil])
        #expect(try Self.rows(store, "history").isEmpty)
        #expect(try Self.rows(store, "latest").count == 2)
        #expect(try Self.rows(store, "previous").count == 3)
    }

    /// A build before this index writes only `history` rows: the events it added after this
    /// build's last write are indexed when this build next opens the store.
    @Test func eventsAnEarlierBuildWroteAreIndexedAtTheNextOpen() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let store = try Store(directory: directory)
            try store.set(.dark, for: Keys.theme)  // 1 and 2 by this build
            try store.set(.light, for: Keys.theme)
            try store.set(.system, for: Keys.theme)  // 3 and 4 "by the earlier build"
            try store.set(7, for: Keys.launches)
            try Self.indexAsAnEarlierBuild(store, only: [3, 4])
        }
        let store = try Store(directory: directory)
        #expect(try store.history(of: Keys.theme).map(\.value) == [.dark, .light, .system])
        #expect(try store.history(of: Keys.launches).map(\.value) == [7])
        #expect(try Self.rows(store, "history").isEmpty)
        try store.set(.dark, for: Keys.theme)
        #expect(try store.history(of: Keys.theme).count == 4)
    }

    /// An edited `previous` row that points at its own record, forward, or at another key's record
    /// is reported, never followed round a loop.
    @Test(arguments: [UInt64(3), 4, 1])
    func anEditedIndexIsReportedNotFollowed(pointingAt target: UInt64) throws {
        try withTemporaryStore { store, _ throws in
            try store.set(5, for: Keys.launches)  // 1
            try store.set(.dark, for: Keys.theme)  // 2
            try store.set(.light, for: Keys.theme)  // 3
            try store.set(.system, for: Keys.theme)  // 4
            let log = try store.eventLog
            let previous = try log.environment.openDatabase(named: "previous")
            try log.environment.write { txn in try txn.put(previous, key: UInt64(3).bigEndianBytes, value: target.bigEndianBytes) }
            #expect(throws: ChronicleError.self) { try store.history(of: Keys.theme) }
            #expect(try store.history(of: Keys.launches).map(\.value) == [5])
        }
    }

    /// Writes a raw row into a database of the store, as a hex editor or another build would.
    static func put(_ store: Store, _ name: String, key: [UInt8], value: [UInt8]) throws {
        let log = try store.eventLog
        let database = try log.environment.openDatabase(named: name)
        try log.environment.write { txn in try txn.put(database, key: key, value: value) }
    }

    /// A `previous` row past the log's head (a log renumbered under the index by an earlier
    /// build's compaction, or an edit) would make every later link refused by `MDB_APPEND`.
    @Test func aLinkPastTheHeadIsRepairedByTheNextWrite() throws {
        try withTemporaryStore { store, _ throws in
            try store.set(.dark, for: Keys.theme)
            try Self.put(store, "previous", key: UInt64.max.bigEndianBytes, value: UInt64(1).bigEndianBytes)
            try store.set(.light, for: Keys.theme)
            try store.set(.system, for: Keys.theme)
            #expect(try store.history(of: Keys.theme).map(\.value) == [.dark, .light, .system])
            #expect(try Self.rows(store, "previous").count == 2)
        }
    }

    @Test func aLatestRowEditedToPointForwardIsRepairedByTheNextWrite() throws {
        try withTemporaryStore { store, _ throws in
            try store.set(.dark, for: Keys.theme)
            try Self.put(store, "latest", key: HistoryKey.prefix(domain: .defaults, name: Keys.theme.name), value: UInt64(999).bigEndianBytes)
            try store.set(.light, for: Keys.theme)
            #expect(try store.history(of: Keys.theme).map(\.value) == [.dark, .light])
        }
    }

    /// Opening never read the log before this index: a damaged record in a store to migrate
    /// must not keep `verify` from opening it to say which.
    @Test func aStoreToReindexWithADamagedRecordStillOpensAndVerifyNamesIt() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let store = try Store(directory: directory)
            for n in 1...3 { try store.set(n, for: Keys.launches) }
            try Self.indexAsAnEarlierBuild(store)
            let log = try store.eventLog
            try log.environment.write { txn in
                guard var record = try txn.get(log.dbs.events, key: UInt64(2).bigEndianBytes) else { return }
                record[0] = 0xEE  // no such record kind
                try txn.put(log.dbs.events, key: UInt64(2).bigEndianBytes, value: record)
            }
        }
        let store = try Store(directory: directory)
        let report = try store.verify()
        #expect(report.firstBadSequence == 2)
        #expect(try store.history(of: Keys.launches).map(\.value) == [1, 3])
    }

    /// A build before this index writes while this one has the store open: reads see its events
    /// at once (from the log), and this build's next write indexes them.
    @Test func anEarlierBuildWritingWhileThisOneHasTheStoreOpen() throws {
        try withTemporaryStore { store, _ throws in
            try store.set(.dark, for: Keys.theme)
            try store.set(.light, for: Keys.theme)
            try store.set(.system, for: Keys.theme)
            try store.set(7, for: Keys.launches)
            try Self.indexAsAnEarlierBuild(store, only: [3, 4])
            #expect(try store.history(of: Keys.theme).map(\.value) == [.dark, .light, .system])
            #expect(try store.history(of: Keys.launches).map(\.value) == [7])
            try store.set(8, for: Keys.launches)
            #expect(try Self.rows(store, "history").isEmpty)
            #expect(try store.history(of: Keys.theme).map(\.value) == [.dark, .light, .system])
            #expect(try store.history(of: Keys.launches).map(\.value) == [7, 8])
        }
    }

    /// Edits that keep every link going down and on the same key: `history` cannot tell, `verify` must.
    @Test(arguments: ["skip", "latest"])
    func verifyReportsAnIndexThatDisagreesWithTheLog(edit: String) throws {
        try withTemporaryStore { store, _ throws in
            for theme in [Theme.dark, .light, .system] { try store.set(theme, for: Keys.theme) }  // 1, 2, 3
            #expect(try store.verify().isSound)
            if edit == "skip" {
                try Self.put(store, "previous", key: UInt64(3).bigEndianBytes, value: UInt64(1).bigEndianBytes)
            } else {
                try Self.put(store, "latest", key: HistoryKey.prefix(domain: .defaults, name: Keys.theme.name), value: UInt64(2).bigEndianBytes)
            }
            let report = try store.verify()
            #expect(!report.isSound)
            #expect("\(report)".contains("history index"))
            try store.rebuildViews()
            #expect(try store.verify().isSound)
            #expect(try store.history(of: Keys.theme).count == 3)
        }
    }

    /// Swift's `String` equality is canonical equivalence; the store keeps names by their bytes.
    @Test func namesThatDifferOnlyInNormalizationStayTwoKeysThroughAReplay() throws {
        try withTemporaryStore { store, _ throws in
            let composed = Key<Int>("caf\u{E9}", default: 0)
            let decomposed = Key<Int>("cafe\u{301}", default: 0)
            try store.set(1, for: composed)
            try store.set(2, for: decomposed)
            try store.set(3, for: composed)
            #expect(try store.verify().isSound)
            try store.rebuildViews()
            #expect(try store.verify().isSound)
            #expect(try store.eventLog.entry(.defaults, composed.name)?.sequence == 3)  // each its own view entry
            #expect(try store.eventLog.entry(.defaults, decomposed.name)?.sequence == 2)
            #expect(try store.history(of: composed).map(\.value) == [1, 3])
            #expect(try store.history(of: decomposed).map(\.value) == [2])
        }
    }

    static let composed = "caf\u{E9}"
    static let decomposed = "cafe\u{301}"

    @Test func aLinkIntoTheOtherSpellingsHistoryIsReported() throws {
        try withTemporaryStore { store, _ throws in
            let composed = Key<Int>(Self.composed, default: 0)
            try store.set(1, for: composed)  // 1
            try store.set(2, for: Key<Int>(Self.decomposed, default: 0))  // 2
            try store.set(3, for: composed)  // 3, linked to 1
            try Self.put(store, "previous", key: UInt64(3).bigEndianBytes, value: UInt64(2).bigEndianBytes)
            #expect(throws: ChronicleError.self) { try store.history(of: composed) }
        }
    }

    /// A device-only winner never hides a synced value from peers: compaction keeps each key's
    /// greatest synced event, and the other spelling's is not this key's.
    @Test func compactionKeepsEachSpellingsSyncedEvent() throws {
        try withTemporaryStore { store, _ throws in
            try store.set(1, for: Key<Int>(Self.composed, default: 0, sync: .automaticSmall))  // synced
            try store.set(2, for: Key<Int>(Self.decomposed, default: 0, sync: .automaticSmall))
            try store.set(3, for: Key<Int>(Self.composed, default: 0, sync: .never))  // the device-only winner
            _ = try store.compact()
            #expect(try store.history(of: Key<Int>(Self.composed, default: 0)).map(\.value) == [1, 3])
            #expect(try store.history(of: Key<Int>(Self.decomposed, default: 0)).map(\.value) == [2])
        }
    }

    @Test func aQueuedWriteIsReadOnlyUnderItsOwnSpelling() async throws {
        try await withTemporaryStore { store, _ async throws in
            store[Key<Int>(Self.composed, default: 0)] = 1  // queued
            #expect(store[Key<Int>(Self.decomposed, default: 0)] == 0)
            try await store.flush()
        }
    }

    /// While an earlier build's `history` rows say the links are stale, the key listing counts
    /// revisions from one read of the log.
    @Test func theKeyListingCountsRevisionsWhileTheIndexIsStale() throws {
        try withTemporaryStore { store, _ throws in
            for n in 1...4 { try store.set(n, for: Keys.launches) }
            try store.set(.dark, for: Keys.theme)
            try Self.indexAsAnEarlierBuild(store, only: [4, 5])
            let revisions = Dictionary(uniqueKeysWithValues: try store.eventLog.inspection.catalog().map { ($0.name, $0.revisions) })
            #expect(revisions == [Keys.launches.name: 4, Keys.theme.name: 1])
        }
    }

    @Test func compactionAndReplayRebuildTheIndex() throws {
        try withTemporaryStore { store, _ throws in
            for n in 1...10 { try store.set(n, for: Keys.launches) }
            try store.set(.dark, for: Keys.theme)
            try store.eventLog.replayer.rebuildViews()
            #expect(try store.history(of: Keys.launches).map(\.value) == Array(1...10))
            #expect(try Self.rows(store, "latest").count == 2)
            #expect(try Self.rows(store, "previous").count == 9)
            _ = try store.compact()
            #expect(try store.history(of: Keys.launches).map(\.value) == [10])
            #expect(try store.history(of: Keys.theme).map(\.value) == [.dark])
            #expect(try Self.rows(store, "latest").count == 2)
            #expect(try Self.rows(store, "previous").isEmpty)
            try store.set(11, for: Keys.launches)
            #expect(try store.history(of: Keys.launches).map(\.value) == [10, 11])
        }
    }
}
