@testable import Chronicle
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleTesting
import Foundation
import Synchronization
import Testing

struct RetentionTests {
    static let counter = Key<Int>("window.x", default: 0)
    static let seen = Key<Date>("app.last-seen", default: .distantPast)

    /// Writes `rounds` × 1,000 values of the hot counter and 100 of the date, through the
    /// non-throwing setter and `flush()`, as an app that keeps two settings up to date does.
    func writeHotKeys(_ store: Store, rounds: Range<Int>) async throws {
        for round in rounds {
            for index in 0..<1_000 { store[Self.counter] = round * 1_000 + index }
            for index in 0..<100 { store[Self.seen] = Date(timeIntervalSince1970: Double(round * 100 + index)) }
            try await store.flush()
        }
    }

    /// A hot key used to keep every write (203 bytes an event, for ever). Now the store drops
    /// what the key's retention does not keep, by itself, and what is left costs the same number
    /// of pages however long the key is written.
    ///
    /// Asserted as counts: records, and the pages the databases' B-trees occupy once the
    /// automatic compaction has caught up and a full pass found nothing more. The file's size is
    /// not asserted: its high-water mark depends on when LMDB could reuse freed pages, which
    /// depends on which snapshot a concurrent pass held at the time (scheduling).
    @Test func aHotKeyCostsItsRetentionNotItsWrites() async throws {
        try await withTemporaryStore { store, _ in
            try await writeHotKeys(store, rounds: 0..<10)
            // No call: the automatic compaction trims both keys to their retention (plus at most
            // what one pass's threshold lets in before the next pass), once its passes are done:
            // writes that land during a pass and make another due start it when the pass ends.
            let bound = 2 * (Retention.standard.keptRevisions ?? 0) + SweepSchedule.threshold
            try await sweepsSettle(store)
            let settled = try recordKinds(store).events
            #expect(settled <= bound, "\(settled) event records once the sweep settled; at most \(bound)")
            #expect(store[Self.counter] == 9_999)
            #expect(try store.history(of: Self.counter).count == 100)
            #expect(try store.history(of: Self.counter).last?.value == 9_999)
            #expect(try store.history(of: Self.seen).count == 100)
            _ = try store.applyRetention()
            let first = try (kinds: recordKinds(store), pages: pagesInUse(store))
            #expect(first.kinds.events == 200)
            // As many writes again: the same records, the same pages (within a B-tree's slack).
            try await writeHotKeys(store, rounds: 10..<20)
            try await sweepsSettle(store)
            let settledAgain = try recordKinds(store).events
            #expect(settledAgain <= bound, "\(settledAgain) event records once the sweep settled again; at most \(bound)")
            _ = try store.applyRetention()
            let second = try (kinds: recordKinds(store), pages: pagesInUse(store))
            #expect(second.kinds.events == 200)
            #expect(second.kinds.gaps <= first.kinds.gaps + 2, "gap records grew from \(first.kinds.gaps) to \(second.kinds.gaps)")
            #expect(second.pages <= first.pages + first.pages / 5 + 2, "pages in use grew from \(first.pages) to \(second.pages)")
            #expect(store[Self.counter] == 19_999)
            #expect(try store.verify().isSound)
        }
    }

    /// `history(of:)` shows exactly what the key's retention keeps, before and after a pass.
    @Test func historyShowsWhatRetentionKeeps() throws {
        try withTemporaryStore { store, _ in
            let five = Key<Int>("retention.five", default: 0, retention: .revisions(5))
            let all = Key<Int>("retention.all", default: 0, retention: .forever)
            let one = Key<Int>("retention.one", default: 0, retention: .latest)
            for value in 1...400 {
                try store.write { batch in
                    batch[five] = value
                    batch[all] = value
                    batch[one] = value
                }
            }
            #expect(try store.history(of: five).map(\.value) == [396, 397, 398, 399, 400])
            #expect(try store.history(of: one).map(\.value) == [400])
            #expect(try store.history(of: all).count == 400)
            _ = try store.applyRetention()
            #expect(try store.history(of: five).map(\.value) == [396, 397, 398, 399, 400])
            #expect(try store.history(of: one).map(\.value) == [400])
            #expect(try store.history(of: all).count == 400)
            #expect(try recordKinds(store).events == 5 + 1 + 400)
            #expect(try store.verify().isSound)
            // The keys catalog counts what is kept too.
            let catalog = try store.catalog()
            #expect(catalog.first { $0.name == "retention.five" }?.revisions == 5)
        }
    }

    /// The store-wide default applies to keys that declare none, and to keys only peers wrote.
    @Test func theConfigurationSetsTheDefault() throws {
        var configuration = Store.Configuration()
        configuration.retention = .revisions(3)
        try withTemporaryStore(configuration: configuration) { store, _ in
            let plain = Key<Int>("retention.plain", default: 0)
            for value in 1...50 { try store.set(value, for: plain) }
            _ = try store.applyRetention()
            #expect(try store.history(of: plain).map(\.value) == [48, 49, 50])
        }
    }

    /// The store remembers the default it was opened with: a tool (which sets none) applies the
    /// app's, not its own.
    @Test func theStoreRemembersItsDefault() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let plain = Key<Int>("retention.remembered", default: 0)
        do {
            var configuration = Store.Configuration()
            configuration.retention = .revisions(300)
            let app = try Store(directory: directory, configuration: configuration)
            try app.write { batch in for value in 1...250 { batch[plain] = value } }
        }
        let tool = try Store(directory: directory)  // what `chronicle` opens with
        _ = try tool.applyRetention()
        #expect(try tool.history(of: plain).count == 250)
        try tool.write { batch in for value in 251...400 { batch[plain] = value } }
        _ = try tool.applyRetention()
        #expect(try tool.history(of: plain).count == 300)
    }

    /// A routine compaction renumbers nothing: a `changes(from:)` reader resumes where it was
    /// (no restart from 0, the same epoch), observers hear nothing, and a checkpoint inside what
    /// was dropped still resumes.
    @Test(.timeLimit(.minutes(5)))  // a hang guard: the observer's values are awaited
    func readersKeepTheirPlaceThroughCompaction() async throws {
        try await withTemporaryStore { store, _ in
            let key = Key<Int>("retention.read", default: 0, retention: .revisions(2))
            // The automatic compaction waits while the reader takes its places: a pass that ran
            // between the writes and the read dropped some of the 50, and the stream then
            // waited for a 50th entry for ever (a run stalled so, once in about ten).
            let eventLog = try store.eventLog
            eventLog.sweeper.stopSweeping()
            for value in 1...50 { try store.set(value, for: key) }
            var seen: [LogEntry] = []
            for await entry in store.changes(after: 0) {
                seen.append(entry)
                if seen.count == 50 { break }
            }
            eventLog.sweeper.resumeSweeping()
            let early = seen[9].checkpoint  // a place that retention drops
            let late = seen[49].checkpoint
            // What the observer hears, and a signal for each value (waited for, never polled).
            let heard = Mutex<[Int]>([])
            let (arrivals, arrived) = AsyncStream<Void>.makeStream()
            let observer = Task {
                for await value in store.updates(of: key) {
                    heard.withLock { $0.append(value) }
                    arrived.yield()
                }
            }
            var next = arrivals.makeAsyncIterator()
            await next.next()
            #expect(heard.withLock { $0 } == [50])  // the current value
            _ = try store.applyRetention()
            #expect(try recordKinds(store).events == 2)  // 48 dropped, by this pass or the one that started at open
            try store.set(51, for: key)
            var resumed: [LogEntry] = []
            for await entry in store.changes(from: late) {
                resumed.append(entry)
                break
            }
            #expect(resumed.map(\.sequence) == [51])
            #expect(resumed.first?.epoch == late.epoch)
            var fromEarly: [LogEntry] = []
            for await entry in store.changes(from: early) {
                fromEarly.append(entry)
                if fromEarly.count == 3 { break }
            }
            // What the log still holds after the early place: the kept records, not a restart from 0.
            #expect(fromEarly.map(\.sequence) == [49, 50, 51])
            await next.next()
            #expect(heard.withLock { $0 } == [50, 51])  // 51, and nothing for the compaction
            observer.cancel()
            #expect(heard.withLock { $0 } == [50, 51])
        }
    }

    /// `verify` passes after any number of compactions and still catches an edited, removed or
    /// forged gap, and a kept record replaced by a gap (keyed store: only the key makes a gap).
    @Test func verifyCatchesEditedGaps() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("gaps")) { store, _ in
            let key = Key<Int>("retention.verify", default: 0, retention: .revisions(3))
            let other = Key<Int>("retention.other", default: 0, retention: .forever)
            for value in 1...30 {
                try store.set(value, for: key)
                if value % 7 == 0 { try store.set(value, for: other) }
                if value % 10 == 0 { _ = try store.applyRetention() }
            }
            #expect(try store.verify().isSound)
            let eventLog = try store.eventLog
            let gaps = try eventLog.environment.read { txn in
                var found: [(UInt64, [UInt8])] = []
                try txn.scan(eventLog.dbs.events) { key, value in
                    if value.first == RecordKind.gap.rawValue, let sequence = UInt64(bigEndianBytes: key) { found.append((sequence, value)) }
                    return true
                }
                return found
            }
            #expect(gaps.count >= 2)
            let (sequence, original) = try #require(gaps.first)
            func tampered(_ edit: (borrowing Transaction) throws -> Void) throws -> Bool {
                try eventLog.environment.write { txn in try edit(txn) }
                defer { try? eventLog.environment.write { txn in try txn.put(eventLog.dbs.events, key: sequence.bigEndianBytes, value: original) } }
                return try !store.verify().isSound
            }
            // The first sequence moved.
            var edited = original
            edited[8] ^= 1
            #expect(try tampered { txn in try txn.put(eventLog.dbs.events, key: sequence.bigEndianBytes, value: edited) })
            // The gap removed: the log has a hole.
            #expect(try tampered { txn in _ = try txn.delete(eventLog.dbs.events, key: sequence.bigEndianBytes) })
            // A kept record (the forever key's) replaced by a gap with a MAC made without the key.
            let kept = try #require(try store.history(of: other).first?.sequence)
            let forged = try eventLog.environment.read { txn -> [UInt8] in
                let record = try LogRecord(decoding: try #require(try txn.get(eventLog.dbs.events, key: kept.bigEndianBytes)), sequence: kept)
                let before = try LogRecord(decoding: try #require(try txn.get(eventLog.dbs.events, key: (kept - 1).bigEndianBytes)), sequence: kept - 1)
                let gap = Gap(
                    first: kept, chainBefore: before.hash,
                    mac: Gap.mac(key: nil, first: kept, last: kept, chainBefore: before.hash, chainAtLast: record.hash))
                return LogRecord(kind: .gap, body: gap.encoded(), hash: record.hash).encoded()
            }
            let keptOriginal = try eventLog.environment.read { txn in try #require(try txn.get(eventLog.dbs.events, key: kept.bigEndianBytes)) }
            try eventLog.environment.write { txn in try txn.put(eventLog.dbs.events, key: kept.bigEndianBytes, value: forged) }
            #expect(try !store.verify().isSound)
            try eventLog.environment.write { txn in try txn.put(eventLog.dbs.events, key: kept.bigEndianBytes, value: keptOriginal) }
            #expect(try store.verify().isSound)
        }
    }

    /// Old secrets can go: `purgeHistory(of:)` drops a secret's overwritten revisions (their
    /// sealed payloads leave the log) at once, whatever the key's retention.
    @Test func purgeHistoryDropsOldSealedRevisions() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("purge")) { store, _ in
            let token = SecretKey<String?>("auth.rotating", retention: .forever)
            for index in 1...20 { try store.set("token-\(index)", for: token) }
            #expect(try store.history(of: token).count == 20)
            #expect(try store.purgeHistory(of: token) == 19)
            #expect(try store.history(of: token).map(\.value) == ["token-20"])
            #expect(store[token] == "token-20")
            let sealed = try recordKinds(store).events
            #expect(sealed == 1)
            #expect(try store.verify().isSound)
            // Nothing more to drop.
            #expect(try store.purgeHistory(of: token) == 0)
        }
    }

    /// Dropped identities are remembered as a few ranges, not a row each, and a peer that offers
    /// them again does not bring them back.
    @Test func droppedIdentitiesStayDroppedAndTakeFewRows() async throws {
        try await withTemporaryStores(2) { stores in
            let (writer, peer) = (stores[0], stores[1])
            // Kept for ever at first, so the peer receives every revision.
            let a = Key<Int>("retention.a", default: 0, sync: .manual, retention: .forever)
            let b = Key<Int>("retention.b", default: 0, sync: .manual, retention: .forever)
            for value in 1...299 {
                try store(writer, a, value)
                if value % 3 == 0 { try store(writer, b, value) }  // interleaved identities of one writer
            }
            try await Replicator(store: peer, peers: [.store(writer)]).sync()
            #expect(try peer.history(of: a).count == 100)  // the peer's default retention
            // The app now declares the key with a retention of one.
            try store(writer, Key<Int>("retention.a", default: 0, sync: .manual, retention: .latest), 300)
            _ = try writer.applyRetention()
            #expect(try writer.history(of: a).count == 1)
            let dots = try writer.statistics().dots
            #expect(dots <= 100 + 1 + 8, "dots: \(dots)")  // the kept events' rows and a few ranges
            // The peer offers everything back: nothing dropped returns.
            try await Replicator(store: writer, peers: [.store(peer)]).sync()
            _ = try peer.applyRetention()
            #expect(try writer.history(of: a).count == 1)
            #expect(try recordKinds(writer).events == 1 + 99)  // a's current value, b's 99
            #expect(writer[a] == 300 && peer[a] == 300)
            #expect(try writer.verify().isSound)
        }
    }

    private func store(_ store: Store, _ key: Key<Int>, _ value: Int) throws { try store.set(value, for: key) }

    /// A carrier claims a member's next identity under a junk key at a store that verifies
    /// nothing (a relay), then makes the relay's retention drop it. The member's genuine event
    /// under that identity still gets in, and reaches the other members through the relay.
    @Test func aDroppedForgeryDoesNotKeepTheGenuineEventOut() async throws {
        try await withTemporaryStores(4) { stores in
            let (member, relay, carrier, other) = (stores[0], stores[1], stores[2], stores[3])
            let theme = Key<String>("retention.theme", default: "", sync: .manual)
            let junk = Key<Int>("retention.junk", default: 0, sync: .manual)
            try member.set("first", for: theme)
            var range = try EventRange(decoding: Array(try member.exportRange(after: 0)))
            // The forgery: the member's next identity, under the junk key.
            var forged = try #require(range.events.first)
            forged.counter += 1
            forged.key = junk.name
            let (encoding, payload) = try ValueCoder.encode(-1, key: junk.name)
            (forged.encoding, forged.payload) = (encoding.rawValue, payload)
            range.events = [forged]
            range.keys = []
            let receipt = try relay.importRange(Data(range.encoded()))
            #expect(receipt.applied == 1, "\(receipt)")
            // The carrier keeps its junk for ever, so the relay receives all of it and drops the oldest.
            let kept = Key<Int>(junk.name, default: 0, sync: .manual, retention: .forever)
            for value in 1...150 { try carrier.set(value, for: kept) }
            try await Replicator(store: carrier, peers: [.store(relay)]).sync()
            _ = try relay.applyRetention()  // the forgery, the junk key's oldest, and 50 more (some may be gone already)
            #expect(try recordKinds(relay).events == 100)
            // The member's genuine event under that identity.
            try member.set("second", for: theme)
            try await Replicator(store: member, peers: [.store(relay)]).sync()
            try await Replicator(store: other, peers: [.store(relay)]).sync()
            #expect(relay[theme] == "second")
            #expect(other[theme] == "second")
            // An old revision offered again is still known.
            _ = try relay.importRange(try member.exportRange(after: 0))
            #expect(try relay.history(of: theme).count == 2)
        }
    }

    /// Sync ships what is current: after 1,000 writes of one key, a peer receives what the
    /// key's retention keeps, and a peer that synced before keeps its place.
    @Test func syncShipsWhatRetentionKeeps() async throws {
        try await withTemporaryStores(3) { stores in
            let (device, early, late) = (stores[0], stores[1], stores[2])
            let key = Key<Int>("retention.sync", default: 0, sync: .manual, retention: .revisions(10))
            for value in 1...20 { try device.set(value, for: key) }
            try await Replicator(store: device, peers: [.store(early)]).sync()
            try device.write { batch in for value in 21...1_000 { batch[key] = value } }
            // Before any pass of the compaction: the range carries what retention keeps, not every write.
            let toLate = try await Replicator(store: device, peers: [.store(late)]).sync()
            #expect(toLate.sent <= 10, "sent \(toLate.sent)")
            _ = try device.applyRetention()
            let toEarly = try await Replicator(store: device, peers: [.store(early)]).sync()
            #expect(toEarly.sent <= 10, "sent \(toEarly.sent): the push checkpoint restarted")
            #expect(late[key] == 1_000 && early[key] == 1_000)
        }
    }

    /// Automatic mode sends a key written many times within its push delay once: its newest
    /// value. `sync()` still sends what the key's retention keeps.
    @Test func automaticModeSendsTheNewestOfABurst() async throws {
        try await withTemporaryStores(2) { stores in
            let (a, b) = (stores[0], stores[1])
            let key = Key<Int>("retention.burst", default: 0, sync: .automaticSmall, retention: .forever)
            var configuration = Replicator.Configuration()
            configuration.pullInterval = .seconds(60)
            let replicator = Replicator(store: a, peers: [.store(b)], configuration: configuration)
            try a.write { batch in for value in 1...200 { batch[key] = value } }
            await replicator.start()
            // b's value, as an observer hears it arrive (waited for, with the hang guard).
            let arrived = await gatherValues(b.updates(of: key)) { $0.last == 200 }
            #expect(arrived.last == 200)
            await replicator.stop()
            #expect(try b.history(of: key).map(\.value) == [200])
            try await replicator.sync()
            // b keeps its default, the newest 100 by arrival, and its winner (value 200, which
            // arrived first).
            let kept = try b.history(of: key).count
            #expect(kept == 101, "\(kept)")
        }
    }

    /// A store opened with garbage (written with another retention, or by a build before
    /// retention) is trimmed in the background after it opens, with no app code.
    @Test func anOpenedStoreIsTrimmedByItself() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var keepAll = Store.Configuration()
        keepAll.retention = .forever
        do {
            let store = try Store(directory: directory, configuration: keepAll)
            let key = Key<Int>("retention.old", default: 0)
            try store.write { batch in for value in 1...2_000 { batch[key] = value } }
        }
        // The log closes once the store is released (a committer's group may hold it a moment):
        // the next opening is the app's new one, with its default and its opening pass.
        #expect(await logCloses(directory.resolvingSymlinksInPath().path))
        var standard = Store.Configuration()
        standard.retention = .standard  // the app now keeps the standard default
        let store = try Store(directory: directory, configuration: standard)
        try await sweepsSettle(store)  // the opening's pass, over every key, has run
        #expect(try recordKinds(store).events <= 100)
        #expect(store[Key<Int>("retention.old", default: 0)] == 2_000)
        #expect(try store.verify().isSound)
        // The file now says it holds gaps: a build before them refuses it instead of misreading it.
        let format = try store.eventLog.environment.read { txn in try txn.get(try store.eventLog.dbs.meta, key: MetaKey.format) }
        #expect(format == Gaps.formatWithGaps.bigEndianBytes)
    }
}
