public import AsyncHTTPClient
import Chronicle
public import Foundation
import NIOCore
import NIOFoundationCompat
public import NIOHTTP1
import Subprocess
import Synchronization
import SystemPackage

/// A fresh directory path for one test (the test deletes it).
public func temporaryDirectory() -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-tools-tests-\(UUID().uuidString)", isDirectory: true)
}

/// Directories made for one test, deleted when it lets go of this.
public final class Directories: Sendable {
    private let urls = Mutex<[URL]>([])

    public init() {}

    /// A new directory path, deleted with this object.
    public func make() -> URL {
        let url = temporaryDirectory()
        urls.withLock { $0.append(url) }
        return url
    }

    deinit { for url in urls.withLock({ $0 }) { try? FileManager.default.removeItem(at: url) } }
}

/// The `chronicle` executable built beside the test bundle.
public func chronicleExecutable() throws -> URL {
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent("chronicle")
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    let fallback = Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("chronicle")
    guard FileManager.default.isExecutableFile(atPath: fallback.path) else {
        throw ChronicleError.storeUnavailable(reason: "the chronicle executable is not built (swift build --package-path Tools)")
    }
    return fallback
}

/// What a run of the tool printed, and how it ended.
public struct ToolResult: Sendable {
    /// The exit status (128 + the signal when a signal ended it).
    public var status: Int32
    public var stdout: String
    public var stderr: String
}

/// Runs the `chronicle` tool with `arguments` (and `input` on its standard input) and waits for it.
///
/// swift-subprocess reads standard output and standard error concurrently, so
/// a tool that fills one pipe while the test reads the other cannot deadlock.
public func runChronicle(_ arguments: [String], environment: [String: String] = [:], input: String? = nil) async throws -> ToolResult {
    try await runTool(at: try chronicleExecutable().path, arguments, environment: environment, input: input)
}

/// Runs the executable at `path` as `runChronicle` runs the tool.
public func runTool(
    at path: String, _ arguments: [String], environment: [String: String] = [:], input: String? = nil, in directory: String? = nil
) async throws -> ToolResult {
    var overrides: [Environment.Key: String?] = [:]
    for (key, value) in environment { overrides[Environment.Key(stringLiteral: key)] = value }
    let result = try await Subprocess.run(
        .path(FilePath(path)), arguments: Arguments(arguments),
        environment: .inherit.updating(overrides), workingDirectory: directory.map { FilePath($0) }, input: .string(input ?? ""),
        output: .string(limit: 64 << 20), error: .string(limit: 64 << 20))
    let status: Int32 = switch result.terminationStatus {
    case let .exited(code): code
    case let .signaled(signal): 128 + signal
    }
    return ToolResult(status: status, stdout: result.standardOutput, stderr: result.standardError)
}

/// Makes `url` a sparse file of `size` bytes (no disk used): a huge file that costs a test nothing.
public func makeSparseFile(at url: URL, size: UInt64) throws {
    _ = FileManager.default.createFile(atPath: url.path, contents: nil)
    let handle = try FileHandle(forWritingTo: url)
    try handle.truncate(atOffset: size)
    try handle.close()
}

/// `count` random bytes from the system's generator (a junk salt, nonce or ciphertext).
public func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
}

/// What a server answered a ``rawRequest(_:method:token:body:)``.
public struct RawResponse: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// The body's bytes.
    public var data: Data
    /// The body as text (UTF-8).
    public var body: String { String(decoding: data, as: UTF8.self) }

    /// A response with `status` and the body `data`.
    public init(status: Int, data: Data) {
        self.status = status
        self.data = data
    }
}

/// The client the tests send their own requests through: `HTTPClient.shared`'s settings, but a
/// read timeout of the hang guard instead of 90 s. A server that answers late on a busy machine
/// (a push queued behind other clients' Argon2id derivations, three suites at once on two
/// cores) is not a failure; one that never answers is.
public let testHTTPClient: HTTPClient = {
    var configuration = HTTPClient.Configuration.singletonConfiguration
    configuration.timeout.read = requestHangGuard
    return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
}()

/// Sends one request as a hostile or a plain client would, with `token` as a bearer token when
/// given: for checking what a server answers, refuses or serves outside the replicator.
public func rawRequest(_ url: URL, method: HTTPMethod = .GET, token: String?, body: Data? = nil) async throws -> RawResponse {
    var request = HTTPClientRequest(url: url.absoluteString)
    request.method = method
    if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
    if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
    let response = try await testHTTPClient.execute(request, timeout: requestHangGuard)
    let buffer = try await response.body.collect(upTo: 64 << 20)
    return RawResponse(status: Int(response.status.code), data: Data(buffer: buffer))
}

