@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Subprocess
import SystemPackage
import Testing

/// A fresh store directory for one test (deleted by the test).
func temporaryDirectory() -> URL { temporaryStoreDirectory() }

/// The `chronicle-stress` child process built beside the test bundle: another process that
/// writes, reads or imports into a store (see its usage in Sources/chronicle-stress).
func stressExecutable() throws -> URL {
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent("chronicle-stress")
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    let fallback = Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("chronicle-stress")
    try #require(FileManager.default.isExecutableFile(atPath: fallback.path), "build chronicle-stress first")
    return fallback
}

struct ChildResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs `chronicle-stress` in one of its one-shot modes (`set`, `get`, `import-once`) and waits for it.
///
/// swift-subprocess reads standard output and standard error concurrently, so
/// a child that fills one pipe while the test reads the other cannot deadlock.
func runChild(_ arguments: [String], environment: [String: String] = [:]) async throws -> ChildResult {
    var overrides: [Environment.Key: String?] = [:]
    for (key, value) in environment { overrides[Environment.Key(stringLiteral: key)] = value }
    let result = try await Subprocess.run(
        .path(FilePath(try stressExecutable().path)), arguments: Arguments(arguments),
        environment: .inherit.updating(overrides), input: .none,
        output: .string(limit: 1 << 20), error: .string(limit: 1 << 20))
    let status: Int32 = switch result.terminationStatus {
    case let .exited(code): code
    case let .signaled(signal): 128 + signal
    }
    return ChildResult(status: status, stdout: result.standardOutput, stderr: result.standardError)
}

/// Every byte of every file under `directory`.
func allBytes(under directory: URL) throws -> [(URL, Data)] {
    let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL } ?? []
    return try files.filter { !$0.hasDirectoryPath }.map { ($0, try Data(contentsOf: $0)) }
}

// MARK: - Keys used by the tests

enum Theme: String, Codable, Sendable { case system, light, dark }
enum Level: Int, Codable, Sendable { case low = 1, high = 9 }

struct Profile: Codable, Sendable, Equatable {
    var name: String
    var tags: [String]
    var scores: [String: Double]
    var nested: Nested?
    struct Nested: Codable, Sendable, Equatable { var on: Bool }
}

extension Keys {
    static let theme = Key<Theme>("settings.theme", default: .system, sync: .automaticSmall)
    static let launches = Key<Int>("stats.launches", default: 0, sync: .never)
    static let draft = Key<String?>("editor.draft", sync: .manual)
    static let profile = Key<Profile?>("user.profile", sync: .automaticSmall)
}

/// Runs `body` with a tmpfs of `size` mounted on a fresh directory, then unmounts it; returns
/// `nil` without running `body` where mounting is not permitted (not root).
func withTmpfs<R>(size: String, _ body: (URL) async throws -> R) async throws -> R? {
    let mountPoint = temporaryDirectory()
    try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: mountPoint) }
    guard runTool("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", mountPoint.path]) else { return nil }
    defer {
        // A store under the mount closes when its last holder lets go, which can be a moment
        // after the body returns (a test's thread, the committer's last group): then umount fails
        // (EBUSY) and the mount stayed behind, one more each run. Detached lazily instead, it
        // leaves at once and its memory goes when the last file under it closes.
        if !runTool("/bin/umount", [mountPoint.path]) { _ = runTool("/bin/umount", ["-l", mountPoint.path]) }
    }
    return try await body(mountPoint)
}

/// A key file for a sync group in a fresh directory; the directory is deleted by `cleanUp`.
func temporaryKeyFile() throws -> (file: URL, cleanUp: @Sendable () -> Void) {
    let directory = temporaryDirectory()
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let file = directory.appendingPathComponent("group.key")
    try KeyEncryptionKeys.createKeyFile(file)
    return (file, { try? FileManager.default.removeItem(at: directory) })
}


/// Runs a system tool (mount, umount) and reports whether it succeeded.
func runTool(_ tool: String, _ arguments: [String]) -> Bool {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return false }
    process.waitUntilExit()
    return process.terminationStatus == 0
}

/// How long a test waits for something before it calls it a hang: ten minutes, for every wait,
/// so only a thing that never happens fails. Not a measurement: three suites run at once on two
/// cores took over 30 s to end a sync that ends at once on a quiet machine.
let hangGuard: Duration = .seconds(600)

/// `hangGuard` from now, for a semaphore's or a group's wait.
var hangGuardDeadline: DispatchTime { .now() + .seconds(Int(hangGuard.components.seconds)) }

/// Whether `task` finishes within `limit`: a hang guard, not a measurement.
func finishes(_ task: Task<Void, Never>, within limit: Duration = hangGuard) async -> Bool {
    await withTaskGroup(of: Bool.self) { group in
        group.addTask { await task.value; return true }
        group.addTask { try? await Task.sleep(for: limit); return false }
        let first = await group.next() ?? false
        group.cancelAll()
        return first
    }
}

/// Makes `url` a sparse file of `size` bytes (no disk used): a huge file that costs a test nothing.
func makeSparseFile(at url: URL, size: UInt64) throws {
    _ = FileManager.default.createFile(atPath: url.path, contents: nil)
    let handle = try FileHandle(forWritingTo: url)
    try handle.truncate(atOffset: size)
    try handle.close()
}
