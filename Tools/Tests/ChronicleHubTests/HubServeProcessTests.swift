import Foundation
import Subprocess
import Synchronization
import SystemPackage
import Testing
import ToolsTestSupport

/// `chronicle hub serve` as an operator runs it: from a configuration file, stopped by SIGTERM.
@Suite(.enabled(if: hasTestDatabase, "needs CHRONICLE_TEST_DATABASE: run scripts/test.sh"))
struct HubServeProcessTests {
    /// Runs `chronicle hub serve arguments` until `body` returns (given the public and the
    /// operator's URL), then sends SIGTERM; returns how it ended and its standard error. A node
    /// that never says it serves, or never stops, is killed after two minutes (a guard, not a
    /// measurement): the test then fails on its status.
    static func serve(
        _ arguments: [String], environment: [String: String] = [:], _ body: @escaping @Sendable (URL, URL) async throws -> Void
    ) async throws -> (status: TerminationStatus, stderr: String) {
        var overrides: [Environment.Key: String?] = [:]
        for (key, value) in environment { overrides[Environment.Key(stringLiteral: key)] = value }
        let result = try await Subprocess.run(
            .path(FilePath(try chronicleExecutable().path)), arguments: Arguments(["hub", "serve"] + arguments),
            environment: .inherit.updating(overrides), input: .none, output: .sequence, error: .string(limit: 16 << 20)
        ) { execution in
            let guardTask = Task { try? await Task.sleep(for: hangGuard); try? execution.send(signal: .kill) }
            defer { guardTask.cancel() }
            var (node, operatorURL): (URL?, URL?)
            func port(_ line: String) -> URL? {
                line.split(separator: ":").last.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
                    .flatMap { URL(string: "http://127.0.0.1:\($0)") }
            }
            for try await line in execution.standardOutput.strings() {
                if line.hasPrefix("hub serving on") { node = port(line) }
                if line.hasPrefix("hub metrics and health on") { operatorURL = port(line) }
                if let served = node, let operatorURL {
                    try await body(served, operatorURL)
                    try execution.send(signal: .terminate)
                    node = nil
                }
            }
        }
        return (result.terminationStatus, result.standardError)
    }

    /// A configuration file gives the database (a 0600 file beside it), the ports, the
    /// connection limit and the log format; the node serves with them, and its log holds no
    /// library warning from start to stop.
    @Test func aNodeServesFromItsConfigurationFile() async throws {
        let url = try #require(testDatabase)
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "phone")
            let directory = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let database = directory.appendingPathComponent("database")
            try Data(url.utf8).write(to: database)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: database.path)
            let config = directory.appendingPathComponent("hub.json")
            try Data(#"{"database_file": "database", "port": 0, "metrics_port": 0, "max_connections": 2000, "log_format": "json"}"#.utf8)
                .write(to: config)
            // Variables set to nothing are not set: the file's JSON format stands.
            let environment = ["CHRONICLE_HUB_DATABASE": "", "CHRONICLE_LOG_FORMAT": "", "CHRONICLE_LOG_LEVEL": ""]
            let (status, stderr) = try await Self.serve(["--config", config.path], environment: environment) { node, operatorURL in
                let info = try await rawRequest(node.appendingPathComponent("v1/info"), token: token)
                let health = try await rawRequest(operatorURL.appendingPathComponent("healthz"), token: nil)
                #expect(info.status == 200 && health.status == 200)
            }
            #expect(status == .exited(0), "\(stderr)")
            let lines = stderr.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            #expect(lines.contains { ($0["path"] as? String) == "/v1/info" && ($0["status"] as? String) == "200" }, "JSON access log: \(stderr)")
            // Start and stop leave no library warnings or errors in the operator's log.
            #expect(!lines.contains { ["warning", "error", "critical"].contains($0["level"] as? String) }, "\(stderr)")
        }
    }

    /// A device that trickles a push body cannot keep the node from stopping: past the
    /// graceful shutdown's limit (15 s) the request is cut off and the node exits.
    @Test func aTricklingPushDoesNotHoldTheNodeAtSIGTERM() async throws {
        let url = try #require(testDatabase)
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "phone")
            let socket = Mutex<RawSocket?>(nil)
            let (status, stderr) = try await Self.serve(
                ["--database", url, "--port", "0", "--metrics-port", "0", "--max-connections-per-address", "0"]
            ) { node, _ in
                let raw = try RawSocket(port: try #require(node.port), from: "127.0.0.1")
                raw.send("POST /v1/range HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nContent-Length: 100000\r\n\r\nAB")
                socket.withLock { $0 = raw }
                try await Task.sleep(for: .milliseconds(300))  // the push is being read
            }
            socket.withLock { $0?.close() }
            #expect(status != .signaled(SIGKILL), "the node never stopped: \(stderr)")
        }
    }

    /// SIGTERM while a device's long-poll is held (for up to five minutes): the poll is answered
    /// at once with what there is, and the node exits 0 instead of waiting the poll out.
    @Test func sigtermAnswersHeldLongPollsAndExits() async throws {
        let url = try #require(testDatabase)
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "phone")
            let held = Mutex<Task<Int, any Error>?>(nil)
            let (status, stderr) = try await Self.serve(
                ["--database", url, "--port", "0", "--metrics-port", "0", "--max-wait-seconds", "300"]
            ) { node, operatorURL in
                let poll = try #require(URL(string: node.absoluteString + "/v1/range?after=0&wait=300"))
                held.withLock { $0 = Task { try await rawRequest(poll, token: token).status } }
                // Held once the node's gauge says so (recorded at each scrape).
                var waiting = false
                while !waiting {
                    let metrics = try await rawRequest(operatorURL.appendingPathComponent("metrics"), token: nil)
                    waiting = metrics.body.contains("chronicle_hub_long_polls_waiting 1")
                    if !waiting { try await Task.sleep(for: .milliseconds(50)) }
                }
            }
            #expect(status == .exited(0), "the node waited out the long-poll or failed: \(stderr)")
            let poll = try #require(held.withLock { $0 })
            #expect(try await poll.value == 200, "the held long-poll is answered with what there is")
        }
    }
}
