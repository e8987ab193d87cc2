import Chronicle
import Foundation
import Testing

/// A fresh store directory for one test, deleted afterwards.
func temporaryDirectory() -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-tests-\(UUID().uuidString)", isDirectory: true)
}

/// Runs `body` with a store in its own temporary directory, deleted afterwards.
func withTemporaryStore<R>(
    configuration: Store.Configuration = .init(), _ body: (Store, URL) throws -> R
) throws -> R {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let store = try Store(directory: directory, configuration: configuration)
    return try body(store, directory)
}

func withTemporaryStore<R>(
    configuration: Store.Configuration = .init(), _ body: (Store, URL) async throws -> R
) async throws -> R {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let store = try Store(directory: directory, configuration: configuration)
    return try await body(store, directory)
}

/// The `chronicle` executable built beside the test bundle.
func chronicleExecutable() throws -> URL {
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent("chronicle")
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    let fallback = Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("chronicle")
    try #require(FileManager.default.isExecutableFile(atPath: fallback.path), "build the chronicle tool first")
    return fallback
}

struct ToolResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs the `chronicle` tool with `arguments` and waits for it.
func runChronicle(_ arguments: [String], environment: [String: String] = [:]) throws -> ToolResult {
    let process = Process()
    process.executableURL = try chronicleExecutable()
    process.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    for (key, value) in environment { env[key] = value }
    process.environment = env
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    let errData = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return ToolResult(
        status: process.terminationStatus,
        stdout: String(decoding: outData, as: UTF8.self),
        stderr: String(decoding: errData, as: UTF8.self))
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
    static let theme = Key<Theme>("settings.theme", default: .system)
    static let launches = Key<Int>("stats.launches", default: 0, sync: .never)
    static let draft = Key<String?>("editor.draft", sync: .manual)
    static let profile = Key<Profile?>("user.profile")
}
