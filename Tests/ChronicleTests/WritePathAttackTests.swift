@testable import Chronicle
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

/// A hostile reviewer's attacks on the local write path (group commit, queued writes, the
/// registry, `update`, observers, the change stream). Each test states what must hold.
struct WritePathAttackTests {
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

    /// `update`'s body runs under the `pending` lock (inside `queueVisibly`'s `build`). Reading
    /// another key of the same store from the body, the most natural thing to do
    /// (`total = a + b`), takes that lock again whenever any non-throwing write is queued.
    @Test func readingTheStoreInsideAnUpdateWhileAWriteIsQueued() async {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            // A hang is told from slowness by a generous bound; `_exit` skips the exit hook.
            Thread {
                sleep(20)
                FileHandle.standardError.write(Data("hung: update's body never returned\n".utf8))
                _exit(3)
            }.start()
            let directory = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
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
            guard written == 21, store[total] == 21 else { _exit(4) }
            hold.done.wait()
            _exit(0)
        }
        if let result, result.exitStatus != .exitCode(0) {
            Issue.record("child: \(String(decoding: result.standardErrorContent, as: UTF8.self))")
        }
    }

    /// A thread that keeps setting a key with the non-throwing setter (a slider bound to a
    /// `@Default`) while another updates it: `update` waits for the queued change and reads
    /// again, finds a newer queued one, and so on; it must still get its turn.
    @Test func updateIsNotStarvedByANonThrowingWriterOfTheSameKey() throws {
        try withTemporaryStore { store, _ in
            let key = Key<Int>("attack.slider", default: 0)
            let stop = Atomic<Bool>(false)
            let writer = DispatchSemaphore(value: 0)
            Thread {
                var i = 0
                while !stop.load(ordering: .acquiring) {
                    i += 1
                    store[key] = i
                    if i % 64 == 0 { usleep(100) }  // a user dragging a slider, not a flood
                }
                writer.signal()
            }.start()
            defer {
                stop.store(true, ordering: .releasing)
                writer.wait()
            }
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
}
