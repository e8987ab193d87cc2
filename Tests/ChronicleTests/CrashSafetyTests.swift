@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import ChronicleLMDB
import Synchronization
import Testing

struct CrashSafetyTests {
    @Test func killedWritersLoseNoAcknowledgedWrite() async throws {
        var random = SeededGenerator(seed: 11)
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var acknowledged = [Int](repeating: 0, count: 8)
        for _ in 0..<killsPerMode {
            let lines = try await runAndKill("writes", store: directory, random: &random)
            for line in lines {
                let parts = line.split(separator: " ")
                if parts.count == 3, let thread = Int(parts[1]), let n = Int(parts[2]) { acknowledged[thread] = max(acknowledged[thread], n) }
            }
            // Opens without a recovery step; every acknowledged write is there; views equal a replay.
            let store = try Store(directory: directory)
            for thread in 0..<8 {
                #expect(store[Key<Int>("w.\(thread)", default: 0)] >= acknowledged[thread], "thread \(thread)")
            }
            #expect(try store.verify().isSound)
        }
        #expect(acknowledged.reduce(0, +) > 0)
    }

    /// Killed while the automatic compaction runs (two revisions a key: it drops records after
    /// nearly every commit): every acknowledged write survives, and the log verifies.
    @Test func killedDuringAutomaticCompactionLosesNothing() async throws {
        var random = SeededGenerator(seed: 15)
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var acknowledged = [Int](repeating: 0, count: 8)
        var configuration = Store.Configuration()
        configuration.retention = .revisions(2)
        for _ in 0..<killsPerMode {
            let lines = try await runAndKill("writes", store: directory, environment: ["CHRONICLE_RETENTION": "2"], random: &random)
            for line in lines {
                let parts = line.split(separator: " ")
                if parts.count == 3, let thread = Int(parts[1]), let n = Int(parts[2]) { acknowledged[thread] = max(acknowledged[thread], n) }
            }
            let store = try Store(directory: directory, configuration: configuration)
            for thread in 0..<8 {
                #expect(store[Key<Int>("w.\(thread)", default: 0)] >= acknowledged[thread], "thread \(thread)")
            }
            #expect(try store.verify().isSound)
        }
        // The compaction did run: the log holds far fewer events than were written.
        let store = try Store(directory: directory, configuration: configuration)
        _ = try store.applyRetention()
        #expect(try recordKinds(store).events <= 8 * 2)
        #expect(try recordKinds(store).gaps > 0)
        #expect(acknowledged.reduce(0, +) > 8 * 2)
        #expect(try store.verify().isSound)
    }

    /// Two processes compact one store at once (each its own automatic passes, and this one
    /// explicit ones) while both write; the child is killed. Nothing acknowledged is lost, and
    /// the log verifies.
    @Test func twoProcessesCompactingOneStoreLoseNothing() async throws {
        var random = SeededGenerator(seed: 16)
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = Store.Configuration()
        configuration.retention = .revisions(2)
        let store = try Store(directory: directory, configuration: configuration)
        let mine = Key<Int>("parent.hot", default: 0)
        var acknowledged = [Int](repeating: 0, count: 8)
        var written = 0
        for _ in 0..<killsPerMode {
            let base = written
            let writer = Task.detached { () -> Int in
                var last = base
                for value in 1...400 {
                    guard (try? store.set(base + value, for: mine)) != nil else { break }
                    last = base + value
                    if value % 50 == 0 { _ = try? store.applyRetention() }
                }
                return last
            }
            let lines = try await runAndKill("writes", store: directory, environment: ["CHRONICLE_RETENTION": "2"], random: &random)
            written = await writer.value
            for line in lines {
                let parts = line.split(separator: " ")
                if parts.count == 3, let thread = Int(parts[1]), let n = Int(parts[2]) { acknowledged[thread] = max(acknowledged[thread], n) }
            }
            for thread in 0..<8 {
                #expect(store[Key<Int>("w.\(thread)", default: 0)] >= acknowledged[thread], "thread \(thread)")
            }
            #expect(store[mine] == written)
            #expect(try store.verify().isSound)
        }
        _ = try store.applyRetention()
        let events = try recordKinds(store).events
        // What each key kept, when it is more than its two newest: the winner or a held-back
        // record among them says why (a record of the failure, not part of the promise).
        let kept = Dictionary(grouping: try store.logEntries(), by: \.key).mapValues { entries in
            entries.map { "\($0.sequence)\($0.isCurrent ? " current" : "")\($0.isHeldBack ? " held back" : "")" }
        }.filter { $0.value.count > 2 }
        #expect(events <= 9 * 2, "\(events) events kept: \(kept)")
    }

    /// Non-throwing writes followed by `flush()`, and the async durable `set`: what was
    /// acknowledged after them survives SIGKILL.
    @Test func killedAfterFlushLosesNothingAcknowledged() async throws {
        var random = SeededGenerator(seed: 14)
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var acknowledged = 0
        for _ in 0..<killsPerMode {
            let lines = try await runAndKill("mixed", store: directory, random: &random)
            acknowledged = max(acknowledged, lines.compactMap { Int($0.split(separator: " ").last ?? "") }.max() ?? 0)
            let store = try Store(directory: directory)
            for name in ["m.1", "m.2", "m.3", "m.4", "m.d"] {
                #expect(store[Key<Int>(name, default: 0)] >= acknowledged, "\(name)")
            }
            #expect(try store.verify().isSound)
        }
        #expect(acknowledged > 0)
    }

    @Test func killedBatchesAreAllOrNothing() async throws {
        var random = SeededGenerator(seed: 12)
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var acknowledged = 0
        for _ in 0..<killsPerMode {
            let lines = try await runAndKill("batches", store: directory, random: &random)
            acknowledged = max(acknowledged, lines.compactMap { Int($0.split(separator: " ").last ?? "") }.max() ?? 0)
            let store = try Store(directory: directory)
            let values = (0..<10).map { store[Key<Int>("b.\($0)", default: 0)] }
            #expect(Set(values).count == 1, "a batch was partially applied: \(values)")
            #expect(values[0] >= acknowledged)
            #expect(try store.verify().isSound)
        }
    }

    @Test(arguments: ["rebuild", "compact", "import"])
    func killsDuringMaintenanceLeaveASoundStore(mode: String) async throws {
        var random = SeededGenerator(seed: UInt64(mode.utf8.count))
        let directory = temporaryDirectory()
        let rangeFile = temporaryDirectory().appendingPathExtension("range")
        defer {
            try? FileManager.default.removeItem(at: directory)
            try? FileManager.default.removeItem(at: rangeFile)
        }
        var extra: [String] = []
        if mode == "import" {
            try withTemporaryStore { source, _ throws in
                try source.write { batch in for i in 0..<2_000 { batch[Key<Int>("imported.\(i)", default: -1)] = i } }
                try source.exportFile(sequences: 1...UInt64.max).write(to: rangeFile)
            }
            extra = [rangeFile.path]
        } else {
            let store = try Store(directory: directory)
            try store.write { batch in for i in 0..<2_000 { batch[Key<Int>("filler.\(i % 200)", default: -1)] = i } }
        }
        var acknowledged = 0
        for _ in 0..<killsPerMode {
            let lines = try await runAndKill(mode, store: directory, extra: extra, random: &random)
            acknowledged = max(acknowledged, lines.compactMap { Int($0.split(separator: " ").last ?? "") }.max() ?? 0)
            let store = try Store(directory: directory)
            #expect(store[Key<Int>("r.n", default: 0)] >= acknowledged)
            #expect(try store.verify().isSound, "\(mode)")
            if mode == "import", store[Key<Int>("imported.0", default: -1)] != -1 {
                #expect(store[Key<Int>("imported.1999", default: -1)] == 1999)  // a range is all or nothing
            }
        }
    }

    @Test func staleReaderSlotsOfKilledProcessesAreCleared() async throws {
        var random = SeededGenerator(seed: 13)
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        for _ in 0..<3 { _ = try await runAndKill("writes", store: directory, random: &random) }
        let store = try Store(directory: directory)
        // Opening cleared every slot the killed processes held; none is left to clear.
        #expect(try store.eventLog.environment.clearStaleReaders() == 0)
        #expect(try store.verify().isSound)
    }
}
