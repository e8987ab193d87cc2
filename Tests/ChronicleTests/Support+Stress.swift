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
