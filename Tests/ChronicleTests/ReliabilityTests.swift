@testable import Chronicle
import ChronicleTesting
import Foundation
import ChronicleLMDB
import Synchronization
import Testing

/// The `chronicle-stress` child built beside the tests.
func stressExecutable() throws -> URL {
    let tool = try chronicleExecutable().deletingLastPathComponent().appendingPathComponent("chronicle-stress")
    try #require(FileManager.default.isExecutableFile(atPath: tool.path))
    return tool
}

/// How many kills per mode: small in CI, larger with `CHRONICLE_RELIABILITY=long`.
let killsPerMode = ProcessInfo.processInfo.environment["CHRONICLE_RELIABILITY"] == "long" ? 60 : 6

/// Starts a stress child, lets it run for a random moment, kills it with SIGKILL,
/// and returns every line it printed.
func runAndKill(_ mode: String, store: URL, extra: [String] = [], random: inout SeededGenerator) throws -> [String] {
    let process = Process()
    process.executableURL = try stressExecutable()
    process.arguments = [mode, store.path] + extra
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    let lines = Mutex<[String]>([])
    let reader = Thread {
        var pending = Data()
        while true {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            pending.append(chunk)
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                lines.withLock { $0.append(line) }
                pending.removeSubrange(pending.startIndex...newline)
            }
        }
    }
    try process.run()
    reader.start()
    // Run until at least one write was acknowledged, then a random extra moment.
    var waited = 0
    while lines.withLock({ $0.isEmpty }) && waited < 3000 {
        usleep(2000)
        waited += 1
    }
    usleep(UInt32.random(in: 1_000...150_000, using: &random))
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
    while !reader.isFinished { usleep(1000) }
    #expect(process.terminationReason == .uncaughtSignal)
    return lines.withLock { $0 }
}

struct CrashSafetyTests {
    @Test func killedWritersLoseNoAcknowledgedWrite() async throws {
        var random = SeededGenerator(seed: 11)
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var acknowledged = [Int](repeating: 0, count: 8)
        for _ in 0..<killsPerMode {
            let lines = try runAndKill("writes", store: directory, random: &random)
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

    @Test func killedBatchesAreAllOrNothing() async throws {
        var random = SeededGenerator(seed: 12)
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var acknowledged = 0
        for _ in 0..<killsPerMode {
            let lines = try runAndKill("batches", store: directory, random: &random)
            acknowledged = max(acknowledged, lines.compactMap { Int($0.split(separator: " ").last ?? "") }.max() ?? 0)
            let store = try Store(directory: directory)
            let values = (0..<10).map { store[Key<Int>("b.\($0)", default: 0)] }
            #expect(Set(values).count == 1, "a batch was partially applied: \(values)")
            #expect(values[0] >= acknowledged)
            #expect(try store.verify().isSound)
        }
    }

    @Test(arguments: ["rebuild", "compact", "import"])
    func killsDuringMaintenanceLeaveASoundStore(mode: String) throws {
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
            let lines = try runAndKill(mode, store: directory, extra: extra, random: &random)
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
        for _ in 0..<3 { _ = try runAndKill("writes", store: directory, random: &random) }
        let store = try Store(directory: directory)
        // Opening cleared every slot the killed processes held; none is left to clear.
        #expect(try store.eventLog.environment.clearStaleReaders() == 0)
        #expect(try store.verify().isSound)
    }
}

struct CorruptFileTests {
    func makeStore(_ directory: URL) throws {
        let store = try Store(directory: directory)
        try store.write { batch in for i in 0..<500 { batch[Key<Int>("k.\(i)", default: 0)] = i } }
    }

    @Test func truncatedZeroedAndGarbageFilesGiveClearErrors() async throws {
        for damage in ["truncate", "zero", "garbage", "empty"] {
            let directory = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            try makeStore(directory)
            let file = directory.appendingPathComponent("data.mdb")
            var data = try Data(contentsOf: file)
            switch damage {
            case "truncate": data = data.prefix(data.count / 2)
            case "zero": data = Data(count: data.count)
            case "garbage": data = Data((0..<data.count).map { UInt8(truncatingIfNeeded: $0 &* 131) })
            default: data = Data()
            }
            try data.write(to: file)
            if damage == "empty" {
                // An empty file is a new store: LMDB initializes it.
                #expect(throws: Never.self) { _ = try Store(directory: directory) }
                continue
            }
            #expect(throws: ChronicleError.self, "\(damage)") { _ = try Store(directory: directory) }
            let tool = try await runChronicle(["verify", "--store", directory.path])
            #expect(tool.status != 0 && tool.stderr.contains("storage error"), "\(damage): \(tool.stderr)")
        }
    }
}

struct HostileInputTests {
    /// Random bytes and mutations of valid inputs must give errors, never crashes, and apply nothing.
    @Test func decodersSurviveRandomAndMutatedInput() async throws {
        var random = SeededGenerator(seed: 99)
        try await withTemporaryStore(configuration: passphraseConfiguration("pw")) { source, _ async throws in
            source[.theme] = .dark
            try source.set("secret", for: .apiToken)
            source[.profile] = Profile(name: "x", tags: ["a"], scores: ["b": 1], nested: nil)
            let valid = Array(try source.exportRange(after: 0))
            let event = try EventRange(decoding: valid).events[0]
            let validEvent = event.encoded()
            let validEntry = ViewEntry(event: event, sequence: 1).encoded()
            try await withTemporaryStore { target, _ async throws in
                for round in 0..<3_000 {
                    var bytes: [UInt8]
                    switch round % 4 {
                    case 0: bytes = (0..<Int.random(in: 0..<200, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                    case 1:
                        bytes = valid
                        for _ in 0..<Int.random(in: 1...8, using: &random) {
                            bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                        }
                    case 2: bytes = Array(valid.prefix(Int.random(in: 0..<valid.count, using: &random)))
                    default:
                        bytes = validEvent
                        bytes[Int.random(in: 0..<bytes.count, using: &random)] ^= UInt8.random(in: 1...255, using: &random)
                    }
                    _ = try? target.importRange(Data(bytes))
                    _ = try? Event(decoding: bytes)
                    _ = try? ViewEntry(decoding: bytes)
                    _ = try? WrappedKey(decoding: bytes)
                    _ = try? KeyBundle.decode(bytes)
                    _ = try? Envelope(decoding: bytes)
                    var entry = validEntry
                    entry[Int.random(in: 0..<entry.count, using: &random)] ^= 0xFF
                    _ = try? ViewEntry(decoding: entry)
                }
                // Only the valid range could have applied anything (mutations almost never survive the checksum).
                #expect(try target.verify().isSound)
                #expect(try target.logEntries().count <= 3)
            }
        }
    }

    @Test func valueDecoderSurvivesMismatchedPayloads() async throws {
        var random = SeededGenerator(seed: 7)
        for _ in 0..<2_000 {
            let payload = (0..<Int.random(in: 0..<24, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            let encoding = UInt8.random(in: 0...12, using: &random)
            _ = try? ValueCoder.decode(Int.self, encoding: encoding, payload: payload, key: "k")
            _ = try? ValueCoder.decode(Int8.self, encoding: encoding, payload: payload, key: "k")
            _ = try? ValueCoder.decode(String.self, encoding: encoding, payload: payload, key: "k")
            _ = try? ValueCoder.decode(Theme.self, encoding: encoding, payload: payload, key: "k")
            _ = try? ValueCoder.decode(Profile?.self, encoding: encoding, payload: payload, key: "k")
            _ = try? ValueCoder.decode(URL.self, encoding: encoding, payload: payload, key: "k")
            _ = try? ValueCoder.decode(Date.self, encoding: encoding, payload: payload, key: "k")
            _ = ValueCoder.jsonText(encoding: encoding, payload: payload)
        }
    }
}

struct FullDiskTests {
    /// A store on a 3 MiB tmpfs: filling the disk gives a clear error, and the store stays consistent.
    @Test func fullDiskLeavesTheStoreConsistent() async throws {
        let mountPoint = temporaryDirectory()
        try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: mountPoint) }
        let mount = Process()
        mount.executableURL = URL(fileURLWithPath: "/bin/mount")
        mount.arguments = ["-t", "tmpfs", "-o", "size=3m", "tmpfs", mountPoint.path]
        mount.standardError = FileHandle.nullDevice
        guard (try? mount.run()) != nil else { return }
        mount.waitUntilExit()
        guard mount.terminationStatus == 0 else { return }  // not permitted here (not root): nothing to test on
        defer {
            let umount = Process()
            umount.executableURL = URL(fileURLWithPath: "/bin/umount")
            umount.arguments = [mountPoint.path]
            try? umount.run()
            umount.waitUntilExit()
        }
        let directory = mountPoint.appendingPathComponent("store")
        var configuration = Store.Configuration()
        configuration.initialMapSize = 256 * 1024
        var acknowledged: [Int] = []
        var failure: ChronicleError?
        do {
            let store = try Store(directory: directory, configuration: configuration)
            let blob = Data(repeating: 0xAB, count: 100 * 1024)
            for i in 0..<100 {
                do {
                    try store.set(blob, for: Key<Data>("blob.\(i)", default: Data()))
                    acknowledged.append(i)
                } catch {
                    failure = error
                    break
                }
            }
        }
        #expect(!acknowledged.isEmpty)
        let error = try #require(failure, "the disk never filled")
        #expect(error.description.contains("disk holding the store is full"), "\(error)")
        let store = try Store(directory: directory, configuration: configuration)
        for i in acknowledged {
            #expect(store[Key<Data>("blob.\(i)", default: Data())].count == 100 * 1024)
        }
        #expect(try store.verify().isSound)
    }
}
