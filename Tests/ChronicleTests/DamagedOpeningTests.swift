@_spi(Tools) @testable import Chronicle
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleTesting
import Foundation
import Testing

/// An opening reads before it writes: a keyed log whose `meta` says less than the log does (its
/// chain key forgotten, its head MAC not matching, its key records gone) is refused with an error
/// that names the damage, and the data file is left exactly as the damage left it. Nothing an
/// opening writes (a chain-key record, a head MAC, a gap's MAC, a new data key) may vouch for
/// records it has not verified.
struct DamagedOpeningTests {
    static let value = Key<String>("damaged.value", default: "", sync: .manual)

    /// A member store in a directory of its own, written three times, closed; `damage` edits its
    /// files as someone without the key would; `body` gets the directory.
    func withDamagedMemberStore(
        _ damage: (Store) throws -> Void, _ body: (URL, Data) throws -> Void
    ) throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let store = try Store(directory: directory, configuration: passphraseConfiguration("owner"))
            for value in ["a", "b", "c"] { try store.set(value, for: Self.value) }
            #expect(try store.verify().isSound)
            try damage(store)
        }
        try body(directory, try Data(contentsOf: directory.appendingPathComponent("data.mdb")))
    }

    /// Expects opening `directory` with `configuration` to fail with `corruptMeta(entry)` (with no
    /// entry: any damage), counted as damage, and to leave the data file byte for byte as it was
    /// (`before`).
    func expectRefused(_ directory: URL, _ configuration: Store.Configuration, entry: String?, before: Data) {
        do {
            _ = try Store(directory: directory, configuration: configuration)
            Issue.record("a damaged store opened (entry \(entry ?? "any"))")
        } catch {
            #expect(error.isDamage, "\(error)")
            if let entry {
                guard case let .corruptMeta(found, _) = error else {
                    Issue.record("unexpected error: \(error)")
                    return
                }
                #expect(found == entry, "\(error)")
            }
        }
        #expect((try? Data(contentsOf: directory.appendingPathComponent("data.mdb"))) == before, "the refused opening wrote to the file")
    }

    /// The cut a reviewer made: the newest record deleted, the head pointed at the one before, and
    /// `chain.key` deleted so that no head MAC is checked. Every opening (with the key, without it)
    /// refused it, where it used to append a new chain-key record and sign the cut head.
    @Test func aCutTailWithTheChainKeyForgottenIsRefusedByEveryOpening() throws {
        try withDamagedMemberStore({ store in
            try cutTail(store)
            try deleteMeta(store, MetaKey.chainKey)
        }) { directory, before in
            expectRefused(directory, passphraseConfiguration("owner"), entry: "chain.key", before: before)
            expectRefused(directory, .init(), entry: "chain.key", before: before)
        }
    }

    /// The same cut with `chain.key` kept: the opening with the key checks the head MAC and refuses
    /// (it used to open, and only the next write or `verify` noticed). A row in the legacy
    /// `history` database and a held-back event whose time came give the opening maintenance to
    /// do; it runs only once the store is accepted, so the refused opening writes nothing.
    @Test(arguments: [false, true])
    func aCutTailIsRefusedByAnOpeningWithTheKey(withMaintenanceDue: Bool) throws {
        try withDamagedMemberStore({ store in
            try cutTail(store)
            guard withMaintenanceDue else { return }
            let eventLog = try store.eventLog
            try eventLog.environment.write { txn in
                try txn.put(eventLog.dbs.legacyHistory, key: HistoryKey.prefix(domain: .defaults, name: Self.value.name) + UInt64(2).bigEndianBytes, value: [])
                try txn.put(eventLog.dbs.deferred, key: UInt64(1 << 16).bigEndianBytes + UInt64(2).bigEndianBytes, value: [])
            }
        }) { directory, before in
            expectRefused(directory, passphraseConfiguration("owner"), entry: "head.mac", before: before)
        }
    }

    /// Every key record deleted (`dk/`, `dk.travel/`, `dk.active`) while the log still holds the
    /// chain-key record and sealed, authenticated events: every opening refuses (the member's
    /// used to mint a new key over the log), since `meta` names a chain key whose record is gone;
    /// with `chain.key` deleted too, because the log holds a chain-key record. Only `dk.active`
    /// deleted: the member's opening refuses, its key source opening a record that is there.
    @Test(arguments: [(records: true, chainKey: false), (records: true, chainKey: true), (records: false, chainKey: false)])
    func deletedKeyRecordsAreRefused(deleted: (records: Bool, chainKey: Bool)) throws {
        try withDamagedMemberStore({ store in
            if deleted.records { try deleteKeyRecords(store) } else { try deleteMeta(store, MetaKey.activeKey) }
            if deleted.chainKey { try deleteMeta(store, MetaKey.chainKey, MetaKey.chainInLog, MetaKey.headMAC) }
        }) { directory, before in
            let entry = deleted.chainKey ? "chain.key" : deleted.records ? "dk/" : "dk.active"
            expectRefused(directory, passphraseConfiguration("owner"), entry: entry, before: before)
            if deleted.records && !deleted.chainKey { expectRefused(directory, .init(), entry: entry, before: before) }
        }
    }

    /// A store keyed by format 1 (keyed from record 1, no chain-key record, no `chain.inlog`) whose
    /// `chain.key` was deleted looks like a format-1 store keyed after its first events, which an
    /// opening keys from there on. Its records do not verify as an unkeyed chain, so the opening
    /// refuses instead of signing them, naming the first record that does not verify.
    @Test func aLegacyKeyedLogWithTheChainKeyForgottenIsRefused() throws {
        try withDamagedMemberStore({ store in
            try rewriteAsFormatOneKeyedLog(store)
            #expect(try store.verify().isSound, "the format-1 fixture verifies before the damage")
            try cutTail(store)
            try deleteMeta(store, MetaKey.chainKey, MetaKey.headMAC)
        }) { directory, before in
            expectRefused(directory, passphraseConfiguration("owner"), entry: nil, before: before)
        }
    }

    /// The whole log re-chained without the key (its chain-key record dropped, every hash
    /// unkeyed, `chain.key`, `chain.inlog` and `head.mac` deleted), `dk.active` kept: it looks like
    /// a store of format 1 keyed after its first events, which an opening keys from there on. A
    /// member's chain is keyed from its first key, so the member's opening refuses it.
    @Test func aMembersLogRechainedWithoutTheKeyIsRefused() throws {
        try withDamagedMemberStore({ store in try rechainWithoutKey(store) }) { directory, before in
            expectRefused(directory, passphraseConfiguration("owner"), entry: "chain.key", before: before)
        }
    }

    /// A member's cut tail with `head.mac` and `chain.inlog` deleted reads as a store keyed by
    /// format 1 (keyed from record 1, which a member's chain-key record is, its MAC written at its
    /// next write): every hash verifies and no MAC is checked. Every opening refuses it, since
    /// its log holds a chain-key record.
    @Test func aCutTailMadeToLookLikeFormatOneIsRefused() throws {
        try withDamagedMemberStore({ store in
            try cutTail(store)
            try deleteMeta(store, MetaKey.headMAC, MetaKey.chainInLog)
        }) { directory, before in
            expectRefused(directory, passphraseConfiguration("owner"), entry: "chain.inlog", before: before)
            expectRefused(directory, .init(), entry: "chain.inlog", before: before)
        }
    }

    /// A store without a key source with a secret: its log re-chained unkeyed (the chain-key
    /// record dropped, a value changed), its key records kept. It looks like a store keyed by
    /// format 1 after its first events, which an opening keys from there on; but its key was made
    /// by a build that keys the chain when it makes a key (the key's creation time is
    /// authenticated), so the opening refuses instead of signing the forgery.
    @Test func aDefaultStoresLogRechainedWithoutTheKeyIsRefused() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let plain = Key<String>("damaged.plain", default: "")
        do {
            let store = try Store(directory: directory)
            try store.set("genuine", for: plain)
            try store.set("s3cr3t", for: .apiToken)
            try rechainWithoutKey(store) { events in
                if let index = events.firstIndex(where: { $0.key == plain.name }) { events[index].payload = Array("forged".utf8) }
            }
            try store.rebuildViews()
        }
        let before = try Data(contentsOf: directory.appendingPathComponent("data.mdb"))
        expectRefused(directory, .init(), entry: "chain.key", before: before)
    }

    /// Every key record of a member deleted and its log re-chained unkeyed, authenticators kept:
    /// the member's opening would make a first key and key the chain afresh. Its own events carry
    /// authenticators, so it held a key: the opening refuses, naming the first such event.
    @Test func aMemberWhoseKeyRecordsAndChainWereRewrittenIsRefused() throws {
        try withDamagedMemberStore({ store in
            try rechainWithoutKey(store)
            try deleteKeyRecords(store)
        }) { directory, before in
            expectRefused(directory, passphraseConfiguration("owner"), entry: nil, before: before)
        }
    }

    /// The explicit repair: a salvage copies what verifies of a refused store into a new store,
    /// writing nothing to the damaged one. A cut tail with the chain key forgotten: the copy holds
    /// the log as the cut left it (what the cut took is not there), verifies, and opens.
    @Test func aRefusedStoreIsSalvagedIntoANewStore() throws {
        try withDamagedMemberStore({ store in
            try cutTail(store)
            try deleteMeta(store, MetaKey.chainKey)
        }) { directory, before in
            let target = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: target) }
            let report = try StoreSalvage.copyWhatVerifies(of: directory, into: target, configuration: passphraseConfiguration("owner"))
            #expect(!report.finding.isSound)
            #expect(report.finding.firstProblem.map { "\($0)" }?.contains("chain.key") == true)
            #expect(try Data(contentsOf: directory.appendingPathComponent("data.mdb")) == before, "the salvage wrote to the damaged store")
            let copy = report.copy
            #expect(try copy.verify().isSound)
            #expect(copy[Self.value] == "b", "the copy holds the log as the cut left it")
            try copy.set("d", for: Self.value)
            #expect(try copy.verify().isSound)
        }
    }

    /// A forged gap (the first record that does not verify): the copy stops before it.
    @Test func aSalvageStopsBeforeTheFirstRecordThatDoesNotVerify() throws {
        try withDamagedMemberStore({ store in
            let eventLog = try store.eventLog
            try eventLog.environment.write { txn in
                let last = try LogHead.read(txn, eventLog.dbs).sequence
                let record = try LogRecord(decoding: try #require(try txn.get(eventLog.dbs.events, key: last.bigEndianBytes)), sequence: last)
                var altered = record
                altered.body[altered.body.count - 40] ^= 1  // inside the event, under its keyed hash
                try txn.put(eventLog.dbs.events, key: last.bigEndianBytes, value: altered.encoded())
            }
        }) { directory, _ in
            let target = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: target) }
            let report = try StoreSalvage.copyWhatVerifies(of: directory, into: target, configuration: passphraseConfiguration("owner"))
            let bad = try #require(report.finding.firstBadSequence)
            #expect(report.copiedThrough == bad - 1)
            #expect(try report.copy.verify().isSound)
            #expect(report.copy[Self.value] == "b")
        }
    }

    /// A kept record replaced by a gap made without the key (an unkeyed checksum), the key's view
    /// and index edited to match: `verify` finds the gap. The owner then drops a neighbouring
    /// record (`purgeHistory`, or the automatic compaction): the drop used to join the forged gap
    /// and sign the joined gap with the real key, after which `verify` passed. It refuses now, and
    /// writes nothing.
    @Test func aDropNeverJoinsAGapForgedWithoutTheKey() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let neighbour = Key<String>("damaged.neighbour", default: "", sync: .manual)
        let victim = Key<String>("damaged.victim", default: "", sync: .manual)
        let store = try Store(directory: directory, configuration: passphraseConfiguration("owner"))
        try store.set("v1", for: neighbour)  // 2
        try store.set("hidden", for: victim)  // 3
        try store.set("v2", for: neighbour)  // 4
        try store.set("x", for: Self.value)  // 5
        let eventLog = try store.eventLog
        try eventLog.environment.write { txn in
            let record = try LogRecord(decoding: try #require(try txn.get(eventLog.dbs.events, key: UInt64(3).bigEndianBytes)), sequence: 3)
            let before = try LogRecord(decoding: try #require(try txn.get(eventLog.dbs.events, key: UInt64(2).bigEndianBytes)), sequence: 2)
            let gap = Gap(first: 3, chainBefore: before.hash, mac: Gap.mac(key: nil, first: 3, last: 3, chainBefore: before.hash, chainAtLast: record.hash))
            try txn.put(eventLog.dbs.events, key: UInt64(3).bigEndianBytes, value: LogRecord(kind: .gap, body: gap.encoded(), hash: record.hash).encoded())
            _ = try txn.delete(eventLog.dbs.view(.defaults), key: Array(victim.name.utf8))
            _ = try txn.delete(eventLog.dbs.latest, key: HistoryKey.prefix(domain: .defaults, name: victim.name))
        }
        #expect(try !store.verify().isSound)
        let before = try Data(contentsOf: directory.appendingPathComponent("data.mdb"))
        #expect(throws: ChronicleError.self) { _ = try store.purgeHistory(of: neighbour) }
        #expect(try Data(contentsOf: directory.appendingPathComponent("data.mdb")) == before, "the refused drop wrote")
        #expect(try !store.verify().isSound, "the forged gap was signed with the real key")
    }

    /// A `deferred` row added without the key (a clock reading far ahead) hides a key's newest
    /// event from its view, which is set back to the event before: `verify` used to take the row's
    /// word and pass. The row must hold its event's own clock reading.
    @Test func aForgedDriftGuardRowIsFound() throws {
        try withDamagedMemberStore({ store in
            let eventLog = try store.eventLog
            let history = try store.history(of: Self.value)
            let (older, newest) = (try #require(history.dropLast().last).sequence, try #require(history.last).sequence)
            try eventLog.environment.write { txn in
                try txn.put(eventLog.dbs.deferred, key: UInt64.max.bigEndianBytes + newest.bigEndianBytes, value: [])
                let olderEvent = try LogRecord(decoding: try #require(try txn.get(eventLog.dbs.events, key: older.bigEndianBytes)), sequence: older)
                    .event(sequence: older)
                try txn.put(eventLog.dbs.view(.defaults), key: Array(Self.value.name.utf8), value: ViewEntry(event: olderEvent, sequence: older).encoded())
            }
            let report = try store.verify()
            #expect(!report.isSound, "a forged drift-guard row passed verify")
            #expect(report.firstBadSequence == newest)
        }) { _, _ in }
    }

    /// A `dots` row added without the key for an identity another member will send (writer ids
    /// are public) makes the import drop the genuine event as a duplicate. `verify` checks every
    /// identity row against the log's events (a fingerprint, then the first row that is wrong).
    @Test func aForgedDotsRowIsFound() throws {
        try withDamagedMemberStore({ store in
            #expect(try store.verify().isSound)
            let eventLog = try store.eventLog
            let stranger = EventIdentity(writer: .random(), counter: 1)
            try eventLog.environment.write { txn in
                try txn.put(eventLog.dbs.dots, key: stranger.dot, value: UInt64(3).bigEndianBytes)
            }
            let report = try store.verify()
            #expect(!report.isSound, "a forged dots row passed verify")
            #expect(report.firstBadSequence == 3)
            #expect(report.firstProblem.map { "\($0)" }?.contains("dots row") == true)
        }) { _, _ in }
    }

    /// A member's log re-chained without the key (nothing keys it) holds nothing verified under a
    /// key: a salvage copies nothing of it, rather than a forgery into a store that verifies.
    @Test func aSalvageCopiesNothingOfALogNothingKeys() throws {
        try withDamagedMemberStore({ store in try rechainWithoutKey(store) }) { directory, _ in
            let target = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: target) }
            let report = try StoreSalvage.copyWhatVerifies(of: directory, into: target, configuration: passphraseConfiguration("owner"))
            #expect(!report.finding.isSound)
            #expect(report.copiedThrough == 0)
            #expect(report.copy[Self.value] == "")
        }
    }

    /// A healthy store opens as before, with and without its key, and a format-1 store with an
    /// unkeyed chain and a data key is still keyed by its first opening.
    @Test func healthyStoresOpenAsBefore() throws {
        try withDamagedMemberStore({ _ in }) { directory, _ in
            let reopened = try Store(directory: directory, configuration: passphraseConfiguration("owner"))
            #expect(reopened[Self.value] == "c")
            #expect(try reopened.verify().isSound)
        }
    }

    /// `Store.standard` that skipped `bootstrap` opens lazily and reads defaults when its store is
    /// refused: `openingError` tells the app it was refused, not empty.
    @Test func anUnavailableStoreSaysWhyItIsUnavailable() throws {
        try withDamagedMemberStore({ store in
            try cutTail(store)
            try deleteMeta(store, MetaKey.chainKey)
        }) { directory, _ in
            let store = Store.openOrUnavailable(directory: directory, configuration: .init())
            #expect(store[Self.value] == "")
            let error = try #require(store.openingError)
            #expect(error.isDamage)
            #expect(throws: ChronicleError.self) { try store.set("d", for: Self.value) }
            let healthy = try Store(directory: temporaryDirectory())
            defer { try? FileManager.default.removeItem(at: healthy.directory) }
            #expect(healthy.openingError == nil)
        }
    }
}

// MARK: - Damage, as someone with the files and no key does it

/// Deletes the newest record and points the head (`seq`, `chain`) at the one before.
func cutTail(_ store: Store) throws {
    let eventLog = try store.eventLog
    try eventLog.environment.write { txn in
        let sequence = try LogHead.read(txn, eventLog.dbs).sequence
        _ = try txn.delete(eventLog.dbs.events, key: sequence.bigEndianBytes)
        let last = try #require(try txn.get(eventLog.dbs.events, key: (sequence - 1).bigEndianBytes))
        try txn.put(eventLog.dbs.meta, key: MetaKey.sequence, value: (sequence - 1).bigEndianBytes)
        try txn.put(eventLog.dbs.meta, key: MetaKey.chain, value: Array(last.suffix(LogRecord.hashLength)))
    }
}

/// Deletes `meta` entries.
func deleteMeta(_ store: Store, _ entries: [UInt8]...) throws {
    let eventLog = try store.eventLog
    try eventLog.environment.write { txn in
        for entry in entries { _ = try txn.delete(eventLog.dbs.meta, key: entry) }
    }
}

/// Deletes every key record of `meta`: wrapped keys, travel wraps, the active key's id.
func deleteKeyRecords(_ store: Store) throws {
    let eventLog = try store.eventLog
    try eventLog.environment.write { txn in
        var doomed: [[UInt8]] = [MetaKey.activeKey]
        try txn.scan(eventLog.dbs.meta) { key, _ in
            if key.starts(with: Array("dk/".utf8)) || key.starts(with: Array("dk.travel/".utf8)) { doomed.append(key) }
            return true
        }
        for key in doomed { _ = try txn.delete(eventLog.dbs.meta, key: key) }
    }
}

/// Rewrites a member store's log as format 1 left a store keyed from its first record: no
/// chain-key record, every record hashed with the chain key, no `chain.inlog`.
func rewriteAsFormatOneKeyedLog(_ store: Store) throws {
    let eventLog = try store.eventLog
    try eventLog.environment.write { txn in
        var head = try LogHead.read(txn, eventLog.dbs)
        let key = try eventLog.chainKeys.key(head.chainKeyID)
        var records: [LogRecord] = []
        try txn.scan(eventLog.dbs.events) { keyBytes, value in
            let record = try LogRecord(decoding: value, sequence: UInt64(bigEndianBytes: keyBytes) ?? 0)
            if record.kind != .chainKey { records.append(record) }
            return true
        }
        try txn.clear(eventLog.dbs.events)
        head.sequence = 0
        head.chain = LogHead.empty.chain
        for record in records {
            head.sequence += 1
            let hash = LogRecord.chainHash(previous: head.chain, sequence: head.sequence, kind: record.kind, body: record.body, key: key)
            try txn.put(eventLog.dbs.events, key: head.sequence.bigEndianBytes, value: LogRecord(kind: record.kind, body: record.body, hash: hash).encoded())
            head.chain = hash
        }
        _ = try txn.delete(eventLog.dbs.meta, key: MetaKey.chainInLog)
        try head.write(txn, eventLog.dbs, chainKey: key)
        try renumberDots(eventLog, txn)
    }
    try store.rebuildViews()
}
