@_spi(Tools) @testable import Chronicle
import ChronicleFormat
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleTesting
import Foundation
import Synchronization
import Testing

/// Retention against a hex editor, a carrier and other processes: each test states a property
/// retention promises (gaps, compacted ranges, declared rules, the automatic compaction),
/// attacks it, and expects it to hold.
struct RetentionTamperTests {
    // MARK: - Forged gaps

    /// FORMAT.md 4.5: "in a keyed log a kept record cannot be replaced by a gap without the key".
    /// The gap's MAC key is taken from `meta`'s `chain.key` entry, not from the log's own
    /// chain-key record. A forger without the key deletes that one entry, replaces the key's
    /// winning record with a gap whose MAC is the unkeyed checksum, and edits the unprotected
    /// view and history index to match: `verify` passes, and the key reads its older value.
    /// Opening the store with its passphrase then re-keys the chain and re-MACs every gap with
    /// the real key (`remacGaps`), laundering the forgery for good; now the opening refuses.
    @Test func aGapForgedWithoutTheKeyFailsVerifyWhenMetaForgetsTheChainKey() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let configuration = passphraseConfiguration("forged gaps")
        let audited = Key<Int>("attack.forged.audited", default: 0, retention: .forever)
        let other = Key<Int>("attack.forged.other", default: 0)
        do {
            let store = try Store(directory: directory, configuration: configuration)
            try store.set(1, for: audited)
            try store.set(2, for: audited)  // the current value the forger rolls back
            try store.set(9, for: other)  // a record after it
            #expect(try store.verify().isSound)
            let eventLog = try store.eventLog
            let history = try store.history(of: audited)
            let (older, winner) = (history[0].sequence, history[1].sequence)
            try eventLog.environment.write { txn in
                let record = try LogRecord(decoding: try #require(try txn.get(eventLog.dbs.events, key: winner.bigEndianBytes)), sequence: winner)
                let before = try LogRecord(
                    decoding: try #require(try txn.get(eventLog.dbs.events, key: (winner - 1).bigEndianBytes)), sequence: winner - 1)
                // A gap made without the key: the unkeyed checksum.
                let gap = Gap(
                    first: winner, chainBefore: before.hash,
                    mac: Gap.mac(key: nil, first: winner, last: winner, chainBefore: before.hash, chainAtLast: record.hash))
                try txn.put(eventLog.dbs.events, key: winner.bigEndianBytes, value: LogRecord(kind: .gap, body: gap.encoded(), hash: record.hash).encoded())
                // The unprotected tables as a replay of the edited log has them.
                let olderEvent = try LogRecord(decoding: try #require(try txn.get(eventLog.dbs.events, key: older.bigEndianBytes)), sequence: older)
                    .event(sequence: older)
                try txn.put(eventLog.dbs.view(.defaults), key: Array(audited.name.utf8), value: ViewEntry(event: olderEvent, sequence: older).encoded())
                try txn.put(eventLog.dbs.latest, key: HistoryKey.prefix(domain: .defaults, name: audited.name), value: older.bigEndianBytes)
                _ = try txn.delete(eventLog.dbs.previous, key: winner.bigEndianBytes)
                _ = try txn.delete(eventLog.dbs.dots, key: try record.event(sequence: winner).dot)
                // The forger's one edit of meta.
                _ = try txn.delete(eventLog.dbs.meta, key: MetaKey.chainKey)
            }
            let report = try store.verify()
            #expect(!report.isSound, "verify passed a keyed log whose winning record was replaced by a gap made without the key")
        }
        // The owner opens the store with its passphrase: the opening refuses the log whose meta
        // forgot its chain key, instead of keying the chain again and re-MACing the forged gap.
        #expect {
            _ = try Store(directory: directory, configuration: configuration)
        } throws: { error in
            guard case let .corruptMeta(entry, _)? = error as? ChronicleError else { return false }
            return entry == "chain.key"
        }
    }

    // MARK: - Edited history links

    /// The sweep walks a key's history links at every pass. An edited link that points to itself,
    /// up the log, or holds other than 8 bytes is reported, never followed round a loop.
    @Test(arguments: ["itself", "later", "short"])
    func anEditedHistoryLinkIsReportedNeverFollowed(edit: String) throws {
        try withTemporaryStore { store, _ in
            let key = Key<Int>("attack.links", default: 0, retention: .forever)
            for value in 1...3 { try store.set(value, for: key) }
            let eventLog = try store.eventLog
            let newest = try #require(try store.history(of: key).last?.sequence)
            let link: [UInt8] =
                switch edit {
                case "itself": newest.bigEndianBytes
                case "later": (newest + 5).bigEndianBytes
                default: [1, 2, 3]
                }
            try eventLog.environment.write { txn in try txn.put(eventLog.dbs.previous, key: newest.bigEndianBytes, value: link) }
            #expect {
                _ = try store.history(of: key)
            } throws: { error in
                guard case let .corruptViewEntry(name, reason)? = error as? ChronicleError else { return false }
                return name == key.name && reason.contains("not to an earlier record")
            }
        }
    }

    // MARK: - Rollbacks

    // MARK: - Declared retention lost

    /// `.forever`: "Nothing of the key's history is dropped unless someone asks". Writes that
    /// carry no declaration (`removeAll(in:)`, `rotateDataKey(reseal:)`, `renameKey`,
    /// `chronicle set`) delete the key's retention row, and the store's default trims it.
    @Test func removeAllKeepsAForeverKeysHistory() throws {
        try withTemporaryStore { store, _ in
            let audited = Key<Int>("attack.declared.audited", default: 0, retention: .forever)
            for value in 1...150 { try store.set(value, for: audited) }
            try store.removeAll(in: .defaults)
            _ = try store.applyRetention()
            let kept = try store.history(of: audited).count
            #expect(kept == 151, "a key declared .forever kept \(kept) of 151 revisions after removeAll(in:)")
        }
    }

    @Test func resealingKeepsEachSecretsDeclaredRetention() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("reseal")) { store, _ in
            let audited = SecretKey<String?>("attack.declared.token", retention: .forever)
            let pin = SecretKey<String?>("attack.declared.pin", retention: .latest)
            for index in 1...150 { try store.set("token-\(index)", for: audited) }
            try store.set("old pin", for: pin)
            try store.rotateDataKey(reseal: true)
            _ = try store.applyRetention()
            let kept = try store.history(of: audited).count
            #expect(kept == 151, "a secret declared .forever kept \(kept) of 151 revisions after a reseal")
            // `.latest` keeps no overwritten secret; the reseal made it keep the one sealed under the old key.
            let pins = try store.history(of: pin).count
            #expect(pins == 1, "a secret declared .latest keeps \(pins) revisions after a reseal (the old key's seal stays)")
        }
    }

    @Test func theToolsSetKeepsAForeverKeysHistory() throws {
        try withTemporaryStore { store, _ in
            let audited = Key<String>("attack.declared.tool", default: "", retention: .forever)
            for value in 1...150 { try store.set("v\(value)", for: audited) }
            try KeysByName(store).setValue(fromText: "from the tool", forKeyNamed: audited.name)  // `chronicle set`
            _ = try store.applyRetention()
            let kept = try store.history(of: audited).count
            #expect(kept == 151, "a key declared .forever kept \(kept) of 151 revisions after `chronicle set`")
        }
    }

    /// The per-process cache of retention rows: another process deleted the key's row (and, as
    /// every writer that changes a row does, replaced `meta`'s `retention.rules` token); this
    /// process's next declared write must not trust its remembered row and must put it back.
    @Test func anotherProcessesUndeclaredWriteIsNotUndoneByTheNextDeclaredOne() throws {
        try withTemporaryStore { store, _ in
            let audited = Key<Int>("attack.declared.cache", default: 0, retention: .forever)
            for value in 1...150 { try store.set(value, for: audited) }
            let eventLog = try store.eventLog
            let prefix = HistoryKey.prefix(domain: .defaults, name: audited.name)
            // What another process's `chronicle set` of the key does to the row.
            try eventLog.environment.write { txn in
                _ = try txn.delete(eventLog.dbs.retention, key: prefix)
                try txn.put(eventLog.dbs.meta, key: MetaKey.retentionRules, value: Array(repeating: 7, count: 16))
            }
            try store.set(151, for: audited)  // the app declares .forever again
            let row = try eventLog.environment.read { txn in try txn.get(eventLog.dbs.retention, key: prefix) }
            #expect(row == Retention.forever.rule.bigEndianBytes, "the declared write left the row \(String(describing: row))")
            _ = try store.applyRetention()
            #expect(try store.history(of: audited).count == 151)
        }
    }

    /// An app that configured `retention = .forever` must not lose undeclared keys' history to
    /// another opener with no retention configured (`chronicle verify`, `get`, `serve`), whose
    /// opening pass runs over every key. (Failed at 20edb17; holds since 37fff58, which records
    /// the default in `meta`.)
    @Test func anotherOpenerKeepsAnAppsForeverDefault() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var app = Store.Configuration()
        app.retention = .forever
        let key = Key<Int>("attack.default.plain", default: 0)
        do {
            let store = try Store(directory: directory, configuration: app)
            try store.write { batch in for value in 1...300 { batch[key] = value } }
            #expect(try store.history(of: key).count == 300)
        }
        // As another process would: a log of its own, opened with the default configuration.
        #expect(await logCloses(directory.path))
        do {
            let tool = try Store(directory: directory)  // `chronicle verify`, `chronicle get`, ...
            _ = try tool.verify()
            try await sweepsSettle(tool)  // its opening pass, over every key, has run
        }
        #expect(await logCloses(directory.path))
        let store = try Store(directory: directory, configuration: app)
        let kept = try store.history(of: key).count
        #expect(kept == 300, "the app keeps every revision by default; opening the store elsewhere with the default left \(kept)")
    }

    // MARK: - Carriers

    /// A store that verifies nothing counts a key's revisions by arrival, whoever sent them: a
    /// carrier with no key that pushes a newer unauthenticated value and 100 more revisions would
    /// push a member's genuine winner out of a bounded history. So a relay keeps every revision
    /// (`chronicle serve` does unless told otherwise), and a member syncing through it later
    /// still gets the genuine value, which it alone authenticates.
    @Test func aRelayThatKeepsEveryRevisionKeepsTheGenuineWinner() async throws {
        let keyDirectory = temporaryDirectory()
        let directories = (0..<4).map { _ in temporaryDirectory() }
        defer {
            try? FileManager.default.removeItem(at: keyDirectory)
            for directory in directories { try? FileManager.default.removeItem(at: directory) }
        }
        let keyFile = keyDirectory.appendingPathComponent("group.key")
        try KeyEncryptionKeys.createKeyFile(keyFile)
        let member = Store.Configuration(keySource: .keyFile(keyFile))
        let (writer, later) = (try Store(directory: directories[0], configuration: member), try Store(directory: directories[1], configuration: member))
        var relayConfiguration = Store.Configuration()
        relayConfiguration.retention = .forever
        let (relay, carrier) = (try Store(directory: directories[2], configuration: relayConfiguration), try Store(directory: directories[3]))
        let theme = Key<String>("attack.relay.theme", default: "", sync: .manual)
        try writer.set("genuine", for: theme)
        try await Replicator(store: writer, peers: [.store(relay)]).sync()
        // The carrier's own revisions, kept for ever on its side so it sends them all.
        let junk = Key<String>(theme.name, default: "", sync: .manual, retention: .forever)
        for index in 1...120 { try carrier.set("junk \(index)", for: junk) }
        try await Replicator(store: carrier, peers: [.store(relay)]).sync()
        _ = try relay.applyRetention()
        try await Replicator(store: later, peers: [.store(relay)]).sync()
        #expect(later[theme] == "genuine", "a member syncing through the relay reads \"\(later[theme])\"")
    }

    // MARK: - Checkpoints

    /// A push checkpoint inside a gap is confirmed by the epoch for `sync()`, but `compact`
    /// compares it with `chainHash(at:)` (zeros inside a gap), calls it stale and deletes it:
    /// the next push after a compaction starts from 0.
    @Test func compactionKeepsAPushCheckpointThatLiesInAGap() async throws {
        try await withTemporaryStores(2) { stores in
            let (device, peer) = (stores[0], stores[1])
            let hot = Key<Int>("attack.checkpoint.hot", default: 0, sync: .manual, retention: .revisions(2))
            for index in 0..<100 { try device.set(index, for: Key<Int>("attack.checkpoint.k\(index)", default: 0, sync: .manual)) }
            try device.set(1, for: hot)
            try await Replicator(store: device, peers: [.store(peer)]).sync()  // the push checkpoint: hot = 1
            for value in 2...5 { try device.set(value, for: hot) }
            _ = try device.applyRetention()  // hot = 1 goes: the checkpoint is inside a gap
            let report = try device.compact()
            #expect(report.dropped > 0)
            let again = try await Replicator(store: device, peers: [.store(peer)]).sync()
            #expect(again.sent <= 4, "the push restarted from 0: sent \(again.sent)")
        }
    }

    // MARK: - The background sweep and the registry

}

/// What held: a sound log with gaps stays sound through what a store does to it later.
struct RetentionHeldTests {
    /// Gaps made while the chain was unkeyed, then the store becomes keyed (its gaps get their
    /// MAC under the key), then a replay of the views, more drops, a copy and a compaction:
    /// `verify` passes after each, and no current value changes.
    @Test func aSoundLogWithGapsVerifiesThroughKeyingReplayAndCompaction() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let hot = Key<Int>("held.hot", default: 0, retention: .latest)
        let kept = Key<Int>("held.kept", default: 0, retention: .forever)
        do {
            let store = try Store(directory: directory)
            for value in 1...40 {
                try store.set(value, for: hot)
                if value % 9 == 0 { try store.set(value, for: kept) }
            }
            _ = try store.applyRetention()  // the pass that started at open may have dropped some already
            #expect(try recordKinds(store).events == 1 + 4)
            #expect(try store.verify().isSound)
        }
        let store = try Store(directory: directory, configuration: passphraseConfiguration("keyed later"))
        #expect(try store.verify().isSound)
        try store.rebuildViews()
        #expect(try store.verify().isSound)
        for value in 41...60 { try store.set(value, for: hot) }
        _ = try store.applyRetention()
        #expect(try store.verify().isSound)
        #expect(try store.history(of: kept).map(\.value) == [9, 18, 27, 36])
        _ = try store.compact()
        #expect(try store.verify().isSound)
        #expect(store[hot] == 60 && store[kept] == 36)
    }
}

/// A year of writes: the cost of remembering dropped identities.
struct RetentionCostTests {
    /// A writer's dropped identities (hot keys) interleave with identities it keeps (keys kept for
    /// ever): its ranges join across the kept ones into one wide range. A later drop finds its
    /// counter inside that range and reads no rows; a step records an origin's identities once,
    /// reading only the rows between the ranges next to them. (Before, every key of a step
    /// re-read up to 65,536 rows: 3.8 s steps here, with the write lock held.)
    @Test func droppingOneRevisionOfManyHotKeysStaysCheap() throws {
        try withTemporaryStore { store, _ in
            let hot = (0..<256).map { Key<Int>("attack.cost.hot\($0)", default: 0, retention: .latest) }
            let audited = (0..<300).map { Key<Int>("attack.cost.audit\($0)", default: 0, retention: .forever) }
            for round in 0..<140 {
                try store.write { batch in
                    for key in hot { batch[key] = round }
                    for key in audited { batch[key] = round }
                }
                _ = try store.applyRetention()
            }
            let eventLog = try store.eventLog
            let writer = try #require(try store.replicaInfo().writer)
            var ranges: [ClosedRange<UInt64>] = []
            try eventLog.environment.read { txn in
                try txn.scan(eventLog.dbs.dots) { key, value in
                    if let range = CompactedIdentities.parse(key: Array(key), value: Array(value)), range.origin == writer { ranges.append(range.range) }
                    return true
                }
            }
            // One range: later drops find their counters inside it and read no rows at all.
            #expect(ranges.count <= 2, "\(ranges.count) ranges")
        }
    }
}
