import AsyncHTTPClient
import Logging
import Subprocess
import SystemPackage
@testable import Chronicle
@testable import ChronicleFormat
@testable import ChronicleHTTPServer
@testable import ChronicleSyncProtocol
import ChronicleHTTP
import ChronicleTesting
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import Testing
import ToolsTestSupport

struct HTTPTests {
    @Test func httpTransportConforms() async throws {
        let directories = Directories()
        let servers = Mutex<[Task<Void, any Error>]>([])
        defer { for task in servers.withLock({ $0 }) { task.cancel() } }
        try await TransportConformance.run {
            let store = try Store(directory: directories.make())
            let (port, task) = try await startServer(ChronicleServer(store: store, token: "conformance"))
            servers.withLock { $0.append(task) }
            return HTTPTransport(baseURL: URL(string: "http://127.0.0.1:\(port)")!, token: "conformance")
        }
    }

    @Test func replicatorSyncsBothWaysOverHTTP() async throws {
        let directories = Directories()
        let server = try Store(directory: directories.make())
        let client = try Store(directory: directories.make())
        server[.httpNote] = "from server"
        client[Key<Int>("http.count", default: 0, sync: .automaticSmall)] = 7
        try await withServer(server) { url in
            let report = try await Replicator(store: client, peers: [.http(url, token: "test-token")]).sync()
            #expect(report.sent == 1 && report.applied == 1)
        }
        #expect(client[.httpNote] == "from server")
        #expect(server[Key<Int>("http.count", default: 0, sync: .automaticSmall)] == 7)
    }

    @Test func wrongOrMissingTokenIsRefusedAndTouchesNothing() async throws {
        let directories = Directories()
        let server = try Store(directory: directories.make())
        let sender = try Store(directory: directories.make())
        sender[.httpNote] = "intruder"
        let range = try sender.exportRange(after: 0)
        try await withServer(server) { url in
            for token in [nil, "wrong", "test-token-but-longer", ""] as [String?] {
                let push = try await rawRequest(url.appendingPathComponent("v1/range"), method: .POST, token: token, body: range)
                #expect(push.status == 401)
                // FORMAT.md 8: a 401 answers this text, not JSON.
                #expect(push.body.trimmingCharacters(in: .whitespacesAndNewlines) == "missing or wrong bearer token", "\(push.body)")
                let info = try await rawRequest(url.appendingPathComponent("v1/info"), token: token)
                #expect(info.status == 401)
            }
            let replicator = Replicator(store: sender, peers: [.http(url, token: "wrong")])
            await #expect(throws: ChronicleError.self) { try await replicator.sync() }
        }
        #expect(try server.logEntries().isEmpty)
    }

    @Test func garbageTruncatedAndOversizedBodiesAreRefused() async throws {
        let directories = Directories()
        let server = try Store(directory: directories.make())
        let sender = try Store(directory: directories.make())
        sender[.httpNote] = String(repeating: "x", count: 10_000)
        let range = try sender.exportRange(after: 0)
        try await withServer(server, maxBodySize: 4096) { url in
            let endpoint = url.appendingPathComponent("v1/range")
            let garbage = try await rawRequest(endpoint, method: .POST, token: "test-token", body: Data("garbage".utf8))
            #expect(garbage.status == 400)
            #expect(garbage.body.contains("malformed"))
            // FORMAT.md 8: every error status but 401 answers {"error":{"message":TEXT}}.
            let error = try JSONSerialization.jsonObject(with: garbage.data) as? [String: Any]
            #expect((error?["error"] as? [String: Any])?["message"] is String, "not the JSON error body: \(garbage.body)")
            let truncated = try await rawRequest(endpoint, method: .POST, token: "test-token", body: range.prefix(100))
            #expect(truncated.status == 400)
            let oversized = try await rawRequest(endpoint, method: .POST, token: "test-token", body: range)
            #expect(oversized.status == 413)
            let badQuery = try await rawRequest(url.appendingPathComponent("v1/range"), token: "test-token")
            #expect(badQuery.status == 400)
            // Still serving after bad clients.
            let info = try await rawRequest(url.appendingPathComponent("v1/info"), token: "test-token")
            #expect(info.status == 200)
        }
        #expect(try server.logEntries().isEmpty)
    }

    @Test func interruptedTransferResumesWithoutLossOrDuplicates() async throws {
        let directories = Directories()
        let server = try Store(directory: directories.make())
        let client = try Store(directory: directories.make())
        try client.write { batch in
            for i in 0..<600 { batch[Key<Int>("bulk.\(i)", default: -1, sync: .manual)] = i }
        }
        try await withServer(server) { url in
            let flaky = Peer(name: "flaky", transport: FailingTransport(HTTPTransport(baseURL: url, token: "test-token"), failing: [.pushAfterDelivery(2)]))
            var small = Replicator.Configuration()
            small.batchEvents = 256  // several batches, so the lost acknowledgement falls between two of them
            await #expect(throws: ChronicleError.self) { try await Replicator(store: client, peers: [flaky], configuration: small).sync() }
            try await Replicator(store: client, peers: [.http(url, token: "test-token")]).sync()
        }
        #expect(try server.logEntries().count == 600)
        #expect(server[Key<Int>("bulk.599", default: -1, sync: .automaticSmall)] == 599)
        #expect(try server.verify().isSound)
    }

    @Test func twoProcessesSyncWithTheTool() async throws {
        let directories = Directories()
        let served = directories.make()
        let other = directories.make()
        do {
            let store = try Store(directory: served)
            store[.httpNote] = "served"
        }
        let tool = FilePath(try chronicleExecutable().path)
        do {
            let store = try Store(directory: other)
            store[Key<String>("http.other", default: "", sync: .manual)] = "pushed"
        }
        // The token travels the documented ways: a private file for the server, the environment for the client.
        let tokenFile = served.appendingPathComponent("token")
        _ = FileManager.default.createFile(atPath: tokenFile.path, contents: Data("t0ken\n".utf8), attributes: [.posixPermissions: 0o644])
        let refused = try await Subprocess.run(
            .path(tool), arguments: ["serve", "--store", served.path, "--port", "0", "--token-file", tokenFile.path],
            output: .discarded, error: .string(limit: 1 << 16))
        #expect(refused.terminationStatus != .exited(0))
        #expect(refused.standardError.contains("chmod 600"), "\(refused.standardError)")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: tokenFile.path)
        // The server runs while the closure does; SIGTERM at the end must shut it down gracefully.
        let server = try await Subprocess.run(
            .path(tool), arguments: ["serve", "--store", served.path, "--host", "127.0.0.1", "--port", "0", "--token-file", tokenFile.path],
            input: .none, output: .sequence, error: .discarded
        ) { execution in
            var lines = execution.standardOutput.strings().makeAsyncIterator()
            let text = try await lines.next() ?? ""
            let port = try #require(text.split(separator: ":").last.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) })
            let sync = try await Subprocess.run(
                .path(tool), arguments: ["sync", "--store", other.path, "--peer", "http://127.0.0.1:\(port)"],
                environment: .inherit.updating(["CHRONICLE_TOKEN": "t0ken"]), output: .string(limit: 1 << 20), error: .string(limit: 1 << 20))
            #expect(sync.terminationStatus == .exited(0), "\(sync.standardError)")
            let summary = sync.standardOutput
            // It sends its own event, and echoes the one it pulled (written by another process than the server's).
            #expect(summary.contains("received 1") && summary.contains("applied 1"), "\(summary)")
            let store = try Store(directory: other)
            #expect(store[.httpNote] == "served")
            try execution.send(signal: .terminate)
            while try await lines.next() != nil {}
        }
        #expect(server.terminationStatus == .exited(0))  // a clean, graceful exit
        let served2 = try Store(directory: served)
        #expect(served2[Key<String>("http.other", default: "", sync: .automaticSmall)] == "pushed")
    }

    @Test func tokensNeverPrint() throws {
        let token = "TOKEN-\(UUID().uuidString)"
        let transport = HTTPTransport(baseURL: URL(string: "https://sync.example.com")!, token: token)
        let directory = Directories()
        let server = ChronicleServer(store: try Store(directory: directory.make()), token: token)
        for value in [transport as Any, server as Any, Peer.http(URL(string: "https://sync.example.com")!, token: token) as Any] {
            var dumped = ""
            dump(value, to: &dumped)
            #expect(!"\(value) \(String(reflecting: value)) \(dumped)".contains(token))
        }
    }

    @Test func bearerTokenComparison() {
        let check = BearerTokenCheck(token: Array("abc".utf8))
        #expect(check.accepts(Array("abc".utf8)))
        #expect(!check.accepts(Array("abd".utf8)))
        #expect(!check.accepts(Array("ab".utf8)))
        #expect(!check.accepts(Array("abcd".utf8)))
        #expect(!check.accepts([]))
        let empty = BearerTokenCheck(token: [])
        #expect(!empty.accepts([]))  // an empty configured token never authenticates
    }
}
