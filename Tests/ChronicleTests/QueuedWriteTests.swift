@testable import Chronicle
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleTesting
import Dispatch
import Foundation
import Subprocess
import Synchronization
import SystemPackage
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The local write path at its edges (group commit, queued writes, the
/// registry, `update`, observers, the change stream). Each test states what must hold.
@Suite(.serialized) struct QueuedWriteTests {
    /// Holds `eventLog`'s LMDB write lock on a thread of its own until `release` is signalled:
    /// every commit of the process (the committer's, imports, promotions) waits meanwhile, so a
    /// queued change stays queued for as long as a test needs.
    static func holdWriteLock(_ eventLog: EventLog) -> (release: DispatchSemaphore, done: DispatchSemaphore) {
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let environment = eventLog.environment
        Thread {
            try? environment.write { _ in
                held.signal()
                release.wait()
            }
            done.signal()
        }.start()
        held.wait()
        return (release, done)
    }

    // MARK: - update

    /// `update`'s body ran under the `pending` lock (inside `queueVisibly`'s `build`). Reading
    /// another key of the same store from the body, the most natural thing to do
    /// (`total = a + b`), took that lock again whenever any non-throwing write was queued:
    /// "Recursive call to lock Mutex", SIGILL (a11feb6; fixed in 9722721).
    @Test func readingTheStoreInsideAnUpdateWhileAWriteIsQueued() async {
        await #expect(processExitsWith: .success, "the update's body trapped (recursive lock) or hung") {
            // A hang is told from slowness by a generous bound; `_exit` skips the exit hook.
            Thread {
                sleep(20)
                FileHandle.standardError.write(Data("hung: update's body never returned\n".utf8))
                _exit(3)
            }.start()
            let directory = temporaryDirectory()
            // `_exit` skips `defer`: every exit below removes the directory first.
            func exit(_ status: Int32) -> Never {
                try? FileManager.default.removeItem(at: directory)
                _exit(status)
            }
            let store = try Store(directory: directory)
            let a = Key<Int>("attack.a", default: 0)
            let total = Key<Int>("attack.total", default: 0)
            try store.set(20, for: a)
            // Keeps a non-throwing write queued while the update's body runs.
            let hold = Self.holdWriteLock(try store.eventLog)
            store[Key<Int>("attack.unrelated", default: 0)] = 1
            let written = try store.update(total) { value in
                value = store[a] + 1  // a read, not a write
                hold.release.signal()  // let the commits go on (the body may run again: harmless)
            }
            guard written == 21, store[total] == 21 else { exit(4) }
            hold.done.wait()
            exit(0)
        }
    }

    /// `update` now (9722721) reads a queued local change instead of waiting for it, and expects
    /// the entry it commits over to be this opening's own (`expectsOwnEntry`): the queued change
    /// commits first. When that change fails instead (the disk has room for the small update, not for the
    /// large queued value), the entry is the earlier value, also this opening's own: the update
    /// commits a value computed from a change that was never written, and was reported failed.
    @Test func anUpdateIsNotBuiltOnAQueuedChangeThatFailed() async throws {
        let ran = try await withTmpfs(size: "8m") { mountPoint in
            let directory = mountPoint.appendingPathComponent("store")
            var configuration = Store.Configuration()
            configuration.initialMapSize = 256 * 1024
            let store = try Store(directory: directory, configuration: configuration)
            let key = Key<Data>("failed.base", default: Data())
            let stored = Data(repeating: 1, count: 8)
            try store.set(stored, for: key)  // committed, by this opening
            // The disk keeps 512 KiB free: room for a small change, not for 4 MiB.
            let filler = mountPoint.appendingPathComponent("filler")
            _ = FileManager.default.createFile(atPath: filler.path, contents: nil)
            let handle = try FileHandle(forWritingTo: filler)
            let chunk = Data(repeating: 1, count: 64 * 1024)
            while (try? handle.write(contentsOf: chunk)) != nil {}
            try handle.truncate(atOffset: try handle.offset() - 512 * 1024)
            try? handle.close()
            let failures = store.writeFailures
            // The large change stays queued while the update reads it.
            let hold = Self.holdWriteLock(try store.eventLog)
            store[key] = Data(repeating: 2, count: 4 << 20)
            // Its leader starts on the committer's queue: wait until it has taken the change (and
            // waits for the lock), or the update could join its group and never show as queued.
            try #require(try store.eventLog.local.committer.withLock { $0 }).waitUntilQueued { $0 == 0 }
            let outcome = Shared<String>("")
            let updated = DispatchSemaphore(value: 0)
            Thread {
                do {
                    let value = try store.update(key) { $0 = $0.prefix(8) }  // 8 bytes, of what it read
                    outcome.withLock { $0 = "wrote \(Array(value))" }
                } catch {
                    outcome.withLock { $0 = "threw \(error)" }
                }
                updated.signal()
            }.start()
            try #require(try store.eventLog.local.committer.withLock { $0 }).waitUntilQueued { $0 > 0 }  // the update is queued behind it
            hold.release.signal()
            hold.done.wait()
            try #require(updated.wait(timeout: hangGuardDeadline) == .success, "the update hung")
            var heard = failures.makeAsyncIterator()
            let failure = await heard.next()
            #expect(failure?.keys == [key.name], "the large change failed")
            // What the update wrote must be derived from a value the store held: the committed one.
            #expect(outcome.withLock { $0 } == "wrote \(Array(stored))")
            #expect(store[key] == stored, "the store holds 8 bytes of a change that was never written")
            return true
        }
        _ = ran
    }

    /// A thread that keeps setting a key with the non-throwing setter (a slider bound to a
    /// `@Default`) while another updates it: `update` (a11feb6) waited for the queued change and
    /// read again, found a newer queued one, and so on; it must still get its turn.
    @Test func updateIsNotStarvedByANonThrowingWriterOfTheSameKey() throws {
        try withTemporaryStore { store, _ in
            let key = Key<Int>("attack.slider", default: 0)
            let stop = Atomic<Bool>(false)
            let writer = DispatchSemaphore(value: 0)
            let started = DispatchSemaphore(value: 0)
            Thread {
                var i = 0
                while !stop.load(ordering: .acquiring) {
                    i += 1
                    store[key] = i
                    if i == 50 { started.signal() }
                    usleep(500)  // a user dragging a slider (2,000 changes a second at most), not a flood
                }
                writer.signal()
            }.start()
            defer {
                stop.store(true, ordering: .releasing)
                writer.wait()
            }
            started.wait()
            var failure: (any Error)?
            for _ in 0..<3 {
                do { try store.update(key) { $0 += 1_000_000 } } catch {
                    failure = error
                    break
                }
            }
            #expect(failure == nil, "update gave up: \(String(describing: failure))")
        }
    }

    // MARK: - Observers

    /// A change queued before the first subscriber came is shown to it (the read sees it), but the
    /// channel never heard its ticket (7a05be7; fixed in 9722721). When a foreign event (here the drift guard's promotion, in
    /// the very transaction that commits the queued change) lands first, the channel takes it for
    /// news: the observer hears a value no read ever returned, then the queued value again.
    @Test func anObserverHearsNoValueTheStoreNeverShowed() async throws {
        var configuration = Store.Configuration()
        configuration.maxClockDrift = .milliseconds(200)
        try await withTemporaryStores(2, configuration: configuration) { stores in
            let (a, b) = (stores[0], stores[1])
            try b.set("b", for: .note)
            let receipt = try a.importRange(try eventAhead(of: b, by: 1_000, value: "from the future"))
            try #require(receipt.deferred == 1)
            // The local change stays queued (the commit waits for the write lock) ...
            let hold = Self.holdWriteLock(try a.eventLog)
            a[.note] = "local"
            // ... while the first observer subscribes: it is handed "local".
            let updates = a.updates(of: .note)
            let heard = Shared<[String]>([])
            let observer = Task {
                for await value in updates {
                    heard.withLock { $0.append(value) }
                    if value == "end" { return }
                }
            }
            // Not a timing assertion: the held-back event must be due when the commit runs.
            try await Task.sleep(for: .milliseconds(1_500))
            #expect(a[.note] == "local")
            hold.release.signal()
            hold.done.wait()
            try await a.flush()
            #expect(a[.note] == "local", "the local change is the latest on the clock")
            try a.set("end", for: .note)
            let finished = await finishes(observer)
            observer.cancel()
            try #require(finished, "the observer never heard the last change")
            #expect(heard.withLock { $0 } == ["local", "end"], "reads showed \"local\" throughout")
        }
    }

    /// The hub runs a channel's handler as soon as it is added, on its own queue: a queued change
    /// published before the channel opened can reach it between the handler's addition and the
    /// first subscription. The channel then knew the change's ticket before its first read, took
    /// it for committed, and the next foreign event (the drift guard's promotion in the change's
    /// own commit) passed for news: `["local", "from the future", "local", "end"]` in about one
    /// full suite run in ten. Here the handler's delivery is made by hand in that window.
    @Test func aQueuedChangeHeardBeforeTheFirstSubscriptionStaysOutstanding() async throws {
        try await withTemporaryStore { store, _ in
            let eventLog = try store.eventLog
            let hold = Self.holdWriteLock(eventLog)
            store[.note] = "local"
            let queued = try #require(eventLog.local.pending.withLock { $0.entry(.defaults, Keys.note.name)?.change })
            let channel = KeyChannel(reader: store, key: Keys.note)
            channel.deliver(pending: queued)  // the hub, before anyone subscribed
            let (stream, continuation) = AsyncStream<String>.makeStream()
            _ = channel.subscribe(continuation)
            // Another writer's event, later on the clock than anything read so far.
            let foreign = Event(
                origin: .random(), counter: 1, replica: .random(), hlc: HLC(rawValue: (UnixMilliseconds.now() + 60_000) << 16), domain: .defaults,
                op: .set, policy: .manual, encoding: ValueEncoding.string.rawValue, sealed: false, key: Keys.note.name, payload: Array("from the future".utf8))
            channel.deliver([CommittedEvent(sequence: 2, event: foreign, isWinner: true)])
            continuation.finish()
            hold.release.signal()
            hold.done.wait()
            var heard: [String] = []
            for await value in stream { heard.append(value) }
            #expect(heard == ["local"], "the queued change was taken for committed")
        }
    }

    /// The fix above (9722721) reads a queued change's ticket at subscription and counts it as
    /// outstanding until its commit is heard (fixed again in 832bd64). But a change's commit is published (to the
    /// handlers present then) before its completion settles it: an observer that subscribes in
    /// between reads the change as queued, never hears its commit, and from then on takes every
    /// replicated change of the key for one "under a local change": deaf until the key is
    /// changed locally or another process commits.
    @Test func anObserverThatSubscribesAsAQueuedChangeCommitsStillHearsReplicatedChanges() async throws {
        try await withTemporaryStores(2) { stores in
            let (a, b) = (stores[0], stores[1])
            let eventLog = try a.eventLog
            var deafAttempts: [Int] = []
            for attempt in 0..<3 {
                let key = Key<String>("deaf.\(attempt)", default: "", sync: .manual)
                // One group of 1,023 queued changes, this key's last: its commit is published, then
                // the completions of the 1,022 others run before its own (the window).
                let hold = Self.holdWriteLock(eventLog)
                a[Key<Int>("deaf.first.\(attempt)", default: 0)] = 1  // its leader waits for the lock
                eventLog.local.committer.withLock { $0 }?.waitUntilQueued { $0 == 0 }
                for i in 0..<1_021 { a[Key<Int>("deaf.other.\(attempt).\(i)", default: 0)] = i }
                a[key] = "local"
                hold.release.signal()
                hold.done.wait()
                // Subscribe once the group's completions have begun (its commit is published) and
                // before this key's own completion runs.
                while eventLog.local.pendingEntry(.defaults, "deaf.other.\(attempt).0") != nil {}
                let updates = a.updates(of: key)
                let heard = Shared<[String]>([])
                let observer = Task {
                    for await value in updates {
                        heard.withLock { $0.append(value) }
                        if value == "end" { return }
                    }
                }
                try await a.flush()
                // A replicated change of the key: the store shows it; the observer must hear it.
                try b.set("from b \(attempt)", for: key)
                _ = try a.importRange(try b.exportRange(after: 0))
                try #require(a[key] == "from b \(attempt)")
                try a.set("end", for: key)
                let finished = await finishes(observer)
                observer.cancel()
                try #require(finished)
                if !heard.withLock({ $0 }).contains("from b \(attempt)") { deafAttempts.append(attempt) }
            }
            #expect(deafAttempts.isEmpty, "the observer never heard the replicated change in attempts \(deafAttempts) of 3")
        }
    }

    // MARK: - Change stream

    /// Iterates `stream` until `stop` accepts an entry (bounded: a deaf stream fails, never hangs).
    static func entries(of stream: Changes, until stop: @escaping @Sendable (LogEntry) -> Bool) async -> [LogEntry] {
        await collect(stream) { entries in entries.last.map(stop) ?? false }
    }

    /// The drift guard held an event back; a consumer handled it (not current) and kept the
    /// checkpoint of the last entry it handled, as documented, then stopped. When it resumes
    /// after the event was let in, it must hear the event again (now current): the first
    /// stream would have redelivered it, a resumed one knew nothing of it (7a05be7; fixed in 9722721).
    @Test func aResumedStreamHearsAPromotionItsPredecessorSawHeldBack() async throws {
        var configuration = Store.Configuration()
        configuration.maxClockDrift = .milliseconds(200)
        try await withTemporaryStores(2, configuration: configuration) { stores in
            let (a, b) = (stores[0], stores[1])
            try a.set("before", for: .small)
            try b.set("b", for: .note)
            _ = try a.importRange(try eventAhead(of: b, by: 800, value: "later"))
            let held = try #require(try a.logEntries().first { $0.valueJSON == "\"later\"" })
            try #require(held.isHeldBack)
            // The first run: up to the held-back event, which it handles (not current) and keeps.
            let first = await Self.entries(of: a.changes(from: .start)) { $0.sequence == held.sequence }
            let saved = try #require(first.last?.checkpoint)
            try #require(first.last?.isHeldBack == true)
            // The event is let in by the promotion timer: the key's observers hear its value.
            let values = await collect(a.updates(of: .note)) { $0.last == "later" }
            try #require(values.last == "later", "the drift guard never let the event in")
            try #require(try a.logEntries().contains { $0.sequence == held.sequence && $0.isCurrent })
            // The resumed run, up to a change made after the resumption.
            // The stream reads the log from `saved` (a change committed before it subscribes is in
            // it too) and says what was let in once it has caught up, before or after "after".
            let sequence = held.sequence
            let resumed = Task {
                await collect(a.changes(from: saved)) { entries in
                    entries.contains { $0.key == Keys.small.name && $0.valueJSON == "\"after\"" }
                        && entries.contains { $0.sequence == sequence && $0.isCurrent }
                }
            }
            try a.set("after", for: .small)
            let heard = await resumed.value
            #expect(
                heard.contains { $0.sequence == held.sequence && $0.isCurrent },
                "the resumed stream never said that the held-back event became current: \(heard.map { ($0.sequence, $0.key, $0.isCurrent) })")
        }
    }

    /// A redelivered (promoted) entry carries the checkpoint of its own, old sequence: a consumer
    /// that keeps `change.checkpoint` as documented moves its checkpoint back, and the next run
    /// hands it again every event it already handled after that one (7a05be7; fixed in 9722721).
    @Test func aRedeliveredEntryDoesNotMoveTheCheckpointBack() async throws {
        var configuration = Store.Configuration()
        configuration.maxClockDrift = .milliseconds(200)
        try await withTemporaryStores(2, configuration: configuration) { stores in
            let (a, b) = (stores[0], stores[1])
            try b.set("b", for: .note)
            _ = try a.importRange(try eventAhead(of: b, by: 800, value: "later"))
            let held = try #require(try a.logEntries().first { $0.valueJSON == "\"later\"" })
            for i in 0..<3 { try a.set("x\(i)", for: .small) }
            // One run: every event, then the held-back one again once it is let in.
            let run = await Self.entries(of: a.changes(from: .start)) { $0.sequence == held.sequence && $0.isCurrent }
            try #require(run.last?.sequence == held.sequence)
            let handled = Set(run.map(\.sequence))
            let saved = try #require(run.last?.checkpoint)  // `saved = change.checkpoint`, as documented
            // The next run, up to a new change.
            let next = Task { await Self.entries(of: a.changes(from: saved)) { $0.valueJSON == "\"new\"" } }
            try a.set("new", for: .small)
            let again = await next.value
            let repeated = again.filter { handled.contains($0.sequence) }.map(\.sequence)
            #expect(repeated.isEmpty, "handed again after resuming from the last entry's checkpoint (handled: \(handled.sorted()))")
        }
    }

    /// `LogCheckpoint` is Codable "to keep beside the consumer's own state"; a checkpoint saved
    /// before `heldBack` existed (the shape of 7a05be7: sequence, epoch, chainHash) must still
    /// decode, or an upgraded consumer can never resume.
    @Test func aCheckpointSavedBeforeHeldBackExistedStillDecodes() throws {
        try withTemporaryStore { store, _ in
            try store.set(1, for: Key<Int>("checkpoint.old", default: 0))
            let checkpoint = try #require(try store.logEntries().last?.checkpoint)
            var object = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(checkpoint)) as? [String: Any])
            object["heldBack"] = nil
            let saved = try JSONSerialization.data(withJSONObject: object)
            #expect(throws: Never.self) { _ = try JSONDecoder().decode(LogCheckpoint.self, from: saved) }
        }
    }

    // MARK: - One environment per file

    /// The same directory reached by another path (a symlink; a bind mount where permitted) while
    /// a store is open on it: the open shares the log or is refused, never a second environment.
    /// The refusal (`OpenFiles.claim`, waiting 5 s for an environment "closing on another
    /// thread") runs inside `EventLogRegistry.lease`'s lock: meanwhile no store of any directory
    /// opens or releases in the process (a release on the main thread hangs the UI for 5 s).
    @Test func anotherPathToAnOpenStoreNeverOpensASecondEnvironmentNorStallsOthers() throws {
        try withTemporaryStore { store, directory in
            try store.set(1, for: Key<Int>("path.n", default: 0))
            let link = temporaryDirectory()
            try FileManager.default.createSymbolicLink(at: link, withDestinationURL: directory)
            defer { try? FileManager.default.removeItem(at: link) }
            let viaLink = try Store(directory: link)
            #expect(try viaLink.eventLog === store.eventLog)
            // A bind mount (root only): another path, the same inode.
            let bound = temporaryDirectory()
            try FileManager.default.createDirectory(at: bound, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: bound) }
            guard runTool("/bin/mount", ["--bind", directory.path, bound.path]) else { return }
            defer { _ = runTool("/bin/umount", [bound.path]) }
            let order = Shared<[String]>([])
            let opened = DispatchSemaphore(value: 0)
            let sameLog = Shared<Bool?>(nil)
            Thread {
                if let viaMount = try? Store(directory: bound) { sameLog.withLock { $0 = (try? viaMount.eventLog) === (try? store.eventLog) } }
                order.withLock { $0.append("bind-mounted open returned") }
                opened.signal()
            }.start()
            usleep(200_000)  // let it reach the claim (not an assertion)
            // Meanwhile another store, on another directory, opens and is released.
            try withTemporaryStore { other, _ in try other.set(1, for: Key<Int>("other.n", default: 0)) }
            order.withLock { $0.append("unrelated store opened and released") }
            try #require(opened.wait(timeout: hangGuardDeadline) == .success)
            // The registry is keyed by the directory's device and inode: the bind-mounted path
            // leases the same log at once, and nothing waits on anything.
            #expect(sameLog.withLock { $0 } == true, "a second environment on one file, or a refused open")
            #expect(order.withLock { $0 }.count == 2)
            #expect(store[Key<Int>("path.n", default: 0)] == 1)
        }
    }

    // MARK: - Exit

    /// `exit()` from one thread while another keeps writing with the non-throwing setter: every
    /// change queued before `exit` was called is committed by the exit hook, and the exit is clean.
    @Test func exitWhileAnotherThreadWritesKeepsWhatWasQueuedBefore() async throws {
        let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
            let directory = temporaryDirectory()
            let store = try Store(directory: directory)
            let key = Key<Int>("exit.n", default: 0)
            let queued = Atomic<Int>(0)
            let enough = DispatchSemaphore(value: 0)
            Thread {
                var i = 0
                while true {
                    i += 1
                    store[key] = i
                    queued.store(i, ordering: .releasing)
                    if i == 20_000 { enough.signal() }
                }
            }.start()
            enough.wait()  // the writer says when it has queued 20,000 changes: no polling
            let before = queued.load(ordering: .acquiring)
            FileHandle.standardOutput.write(Data("\(directory.path) \(before)\n".utf8))
            exit(0)
        }
        guard let result else { return }
        let line = String(decoding: result.standardOutputContent, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
        let fields = line.split(separator: " ")
        let path = try #require(fields.first.map(String.init))
        let before = try #require(fields.last.flatMap { Int($0) })
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try Store(directory: URL(fileURLWithPath: path))
        #expect(store[Key<Int>("exit.n", default: 0)] >= before, "a change queued before exit() was lost")
    }

    /// An exit whose store cannot commit (its write lock held for good by another thread, as by
    /// a disk that stopped answering) still exits: the hook gives up once the committer has
    /// finished no group for ten seconds, where waiting for commits to go on would wait forever.
    /// The change it could not commit is not in the store; the one committed before is.
    @Test func anExitWhoseCommitterIsStuckStillExits() async throws {
        let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
            let directory = temporaryDirectory()
            let store = try Store(directory: directory)
            let key = Key<Int>("stuck.n", default: 0)
            try store.set(1, for: key)
            _ = Self.holdWriteLock(try store.eventLog)  // never released
            store[key] = 2  // queued: its group waits for the lock
            FileHandle.standardOutput.write(Data("\(directory.path)\n".utf8))
            exit(0)
        }
        guard let result else { return }
        let path = try #require(String(decoding: result.standardOutputContent, as: UTF8.self).split(separator: "\n").last.map(String.init))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try Store(directory: URL(fileURLWithPath: path))
        #expect(store[Key<Int>("stuck.n", default: 0)] == 1)
    }

    // MARK: - Back pressure

    /// The non-throwing setter returns at once, whatever the backlog: a loop that sets values
    /// faster than commits complete (an import, a migration, a slider bound to a key) queues
    /// without bound: memory grows, and so does what a crash loses ("those moments"): 13.9 GB
    /// resident after five minutes of one such loop (474b0ff; bounded in 832bd64).
    @Test func aTightLoopOfNonThrowingWritesDoesNotQueueWithoutBound() throws {
        try withTemporaryStore { store, _ in
            let eventLog = try store.eventLog
            let maxQueued = Atomic<Int>(0)
            let finished = WritePathTests.onThreads(2) { thread in
                for i in 0..<60_000 {
                    store[Key<Int>("flood.\(thread).\(i % 512)", default: 0)] = i
                    if i % 256 == 0 {
                        let queued = eventLog.local.pendingCount.load(ordering: .acquiring)
                        var seen = maxQueued.load(ordering: .relaxed)
                        while queued > seen {
                            let (exchanged, original) = maxQueued.compareExchange(expected: seen, desired: queued, ordering: .relaxed)
                            if exchanged { break }
                            seen = original
                        }
                    }
                }
            }
            try #require(finished)
            try eventLog.flush()
            #expect(maxQueued.load(ordering: .relaxed) <= 20_000, "changes queued at once (the committer takes 1,024 a transaction)")
        }
    }

    // MARK: - Full disk

    /// The disk fills up under queued writes, then space comes back. The flush made while it
    /// was full must throw the queued writes' failure and so report it; the flush after the disk
    /// has room (and every write since succeeded) must throw nothing. A flush's own marker (the
    /// empty request `settlePending` queues) is committed alone when its group fails, writing the
    /// head: on a full disk that fails too, and the flush throws the marker's error before it
    /// takes the recorded failures, which the next, healthy flush then throws (474b0ff; fixed in 832bd64).
    @Test func aFlushOnAFullDiskReportsTheQueuedFailureAndTheNextFlushNothing() async throws {
        let ran = try await withTmpfs(size: "8m") { mountPoint in
            let directory = mountPoint.appendingPathComponent("store")
            var configuration = Store.Configuration()
            configuration.initialMapSize = 256 * 1024
            let store = try Store(directory: directory, configuration: configuration)
            let counter = Key<Int>("disk.counter", default: 0)
            try store.set(1, for: counter)
            // Everything else on the disk is taken by another file.
            let filler = mountPoint.appendingPathComponent("filler")
            _ = FileManager.default.createFile(atPath: filler.path, contents: nil)
            let handle = try FileHandle(forWritingTo: filler)
            let chunk = Data(repeating: 1, count: 64 * 1024)
            while (try? handle.write(contentsOf: chunk)) != nil {}
            try? handle.close()
            let blob = Data(repeating: 0xCD, count: 256 * 1024)
            for i in 0..<4 { store[Key<Data>("disk.blob.\(i)", default: Data())] = blob }
            await #expect(throws: ChronicleError.self) { try await store.flush() }
            let unreported = try store.eventLog.local.failures.withLock { $0.unreported.map(\.failure.keys) }
            #expect(unreported == [], "the full-disk flush threw, yet left these failures for the next flush")
            // Room again: every write from now on succeeds.
            try FileManager.default.removeItem(at: filler)
            #expect(throws: Never.self, "a durable write once there is room") { try store.set(blob, for: Key<Data>("disk.durable", default: Data())) }
            store[Key<Data>("disk.blob.0", default: Data())] = blob
            await #expect(throws: Never.self, "a flush once there is room, after writes that all succeeded") { try await store.flush() }
            #expect(throws: Never.self, "an update once there is room") { try store.update(counter) { $0 += 1 } }
            #expect(try store.eventLog.committedEntry(.defaults, "disk.blob.0") != nil)
            #expect(try store.verify().isSound)
            return true
        }
        _ = ran  // nil: mounting is not permitted here
    }

    /// A flush queues an empty request behind the queued changes; when it lands in a group of
    /// its own (the changes' group was already running), the committer still opens a write
    /// transaction and rewrites the head: every such flush costs an extra durable commit, and,
    /// on a full disk, fails by itself (above) (474b0ff; fixed in 832bd64).
    @Test func aFlushCommitsNothingOfItsOwn() async throws {
        try await withTemporaryStore { store, _ async throws in
            let eventLog = try store.eventLog
            try store.set(0, for: Key<Int>("marker.first", default: 0))
            let hold = Self.holdWriteLock(eventLog)
            store[Key<Int>("marker.queued", default: 0)] = 1  // its group waits for the lock
            try #require(eventLog.local.committer.withLock { $0 }).waitUntilQueued { $0 == 0 }  // taken by the leader
            let before = eventLog.lastTransactionID
            let flushed = Task { try await store.flush() }
            try #require(eventLog.local.committer.withLock { $0 }).waitUntilQueued { $0 == 1 }  // the flush's marker queued
            hold.release.signal()
            hold.done.wait()
            try await flushed.value
            #expect(eventLog.lastTransactionID - before == 1, "transactions committed for one queued change and a flush")
        }
    }

    // MARK: - Registry

    /// Stores on one directory opened and released on many threads, each releasing its last
    /// lease with changes still queued while others lease the same log or a new one opens:
    /// no write is lost, no open is refused, nothing stalls.
    @Test func storesOpenedAndReleasedOnManyThreadsLoseNoQueuedWrite() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let errors = Shared<[String]>([])
        let rounds = 60
        let finished = WritePathTests.onThreads(4) { thread in
            for i in 1...rounds {
                do {
                    let store = try Store(directory: directory)
                    for k in 0..<5 { store[Key<Int>("lease.\(thread).\(k)", default: 0)] = i }
                    if i % 7 == 0 { _ = try store.update(Key<Int>("lease.shared", default: 0)) { $0 += 1 } }
                    if i % 11 == 0 { try store.set(i, for: Key<Int>("lease.durable.\(thread)", default: 0)) }
                } catch {
                    errors.withLock { $0.append("\(thread).\(i): \(error)") }
                }
            }
        }
        try #require(finished, "a thread stalled opening or releasing a store")
        #expect(errors.withLock { $0 } == [])
        // The log closes once nothing holds it; a group's leader on the committer's queue may hold
        // it a moment after the last store is released (a guard, not a measurement).
        let closed = EventLogRegistry.waitUntilClosed(path: directory.resolvingSymlinksInPath().path, timeout: hangGuard)
        #expect(closed, "the log stayed open after every store on it was released")
        let store = try Store(directory: directory)
        for thread in 0..<4 {
            for k in 0..<5 { #expect(store[Key<Int>("lease.\(thread).\(k)", default: 0)] == rounds, "\(thread).\(k)") }
        }
        #expect(store[Key<Int>("lease.shared", default: 0)] == 4 * (rounds / 7))
    }
}
