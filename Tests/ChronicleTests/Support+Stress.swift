@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Subprocess
import SystemPackage
import ChronicleLMDB
import Synchronization
import Testing

/// How many kills per mode: small in CI, larger with `CHRONICLE_RELIABILITY=long`.
let killsPerMode = ProcessInfo.processInfo.environment["CHRONICLE_RELIABILITY"] == "long" ? 60 : 6

/// Starts a stress child, lets it run until its first acknowledged write and then a random
/// moment more, kills it with SIGKILL, and returns every line it printed.
func runAndKill(
    _ mode: String, store: URL, extra: [String] = [], environment: [String: String] = [:], random: inout SeededGenerator
) async throws -> [String] {
    let delay = Duration.microseconds(Int.random(in: 1_000...150_000, using: &random))
    var overrides: [Subprocess.Environment.Key: String?] = [:]
    for (name, value) in environment { overrides[Subprocess.Environment.Key(stringLiteral: name)] = value }
    let result = try await Subprocess.run(
        .path(FilePath(try stressExecutable().path)), arguments: Arguments([mode, store.path] + extra),
        environment: .inherit.updating(overrides), input: .none, output: .sequence, error: .discarded
    ) { execution in
        var lines: [String] = []
        var killer: Task<Void, Never>?
        for try await line in execution.standardOutput.strings() {
            lines.append(line.trimmingCharacters(in: .newlines))
            if killer == nil {
                killer = Task {
                    try? await Task.sleep(for: delay)
                    try? execution.send(signal: .kill)
                }
            }
        }
        await killer?.value
        return lines
    }
    #expect(result.terminationStatus == .signaled(SIGKILL))
    return result.closureResult
}
