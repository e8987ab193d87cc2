import Foundation
import Testing
import ToolsTestSupport

/// `chronicle serve`, `chronicle hub …` and `chronicle sync --peer URL` run `chronicle-server`
/// with the same arguments; everything else stays in the everyday tool.
struct ToolServerDispatchTests {
    /// A stand-in `chronicle-server` that prints its arguments and exits with status 7.
    func withFakeServer(_ body: (_ path: String, _ directory: URL) async throws -> Void) async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let script = directory.appendingPathComponent("fake-server")
        try Data("#!/bin/sh\necho \"ran: $*\"\nexit 7\n".utf8).write(to: script)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: script.path)
        try await body(script.path, directory)
    }

    @Test func theServerCommandsRunChronicleServerWithTheSameArguments() async throws {
        try await withFakeServer { server, _ in
            let environment = ["CHRONICLE_SERVER": server]
            let cases: [[String]] = [
                ["serve", "--port", "0", "--token-file", "a file with spaces"],
                ["hub", "tenant", "list", "--json"],
                ["sync", "--store", "s", "--peer", "https://example.com", "--token-file", "t"],
                ["sync", "--peer=http://127.0.0.1:1"],
                ["serve", "--help"],
                ["help", "hub"],
            ]
            for arguments in cases {
                let result = try await runChronicle(arguments, environment: environment)
                #expect(result.status == 7, "\(arguments): \(result.stderr)")
                #expect(result.stdout == "ran: \(arguments.joined(separator: " "))\n")
            }
        }
    }

    /// What the everyday tool does itself never starts the server tool.
    @Test func everydayCommandsStayInTheEverydayTool() async throws {
        try await withFakeServer { server, directory in
            let environment = ["CHRONICLE_SERVER": server]
            let store = directory.appendingPathComponent("store").path
            let set = try await runChronicle(["set", "settings.theme", "dark", "--store", store], environment: environment)
            #expect(set.status == 0, "\(set.stderr)")
            #expect(!set.stdout.contains("ran:"))
            let sync = try await runChronicle(["sync", "--store", store, "--folder", directory.appendingPathComponent("f").path], environment: environment)
            #expect(sync.status == 0, "\(sync.stderr)")
            #expect(sync.stdout.hasPrefix("sent "))
            let help = try await runChronicle(["--help"], environment: environment)
            #expect(help.status == 0 && help.stdout.contains("serve") && help.stdout.contains("hub"))
        }
    }

    /// Without `chronicle-server` the error says how to build it and where to put it; a wrong
    /// `CHRONICLE_SERVER` is named.
    @Test func aMissingServerToolIsAClearError() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // A copy of the tool alone in a directory, with a PATH that holds no chronicle-server.
        let alone = directory.appendingPathComponent("chronicle")
        try FileManager.default.copyItem(at: try chronicleExecutable(), to: alone)
        let result = try await runTool(at: alone.path, ["serve", "--port", "0"], environment: ["PATH": "/usr/bin:/bin"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("chronicle-server, which is not installed"), "\(result.stderr)")
        #expect(result.stderr.contains("swift build --package-path Tools --product chronicle-server"))
        let wrong = try await runChronicle(["hub", "tenant", "list"], environment: ["CHRONICLE_SERVER": "/nonexistent/chronicle-server"])
        #expect(wrong.status == 2)
        #expect(wrong.stderr.contains("CHRONICLE_SERVER is /nonexistent/chronicle-server"), "\(wrong.stderr)")
    }

    /// A `chronicle-server` that is really the everyday tool (a copy, a link, a wrong
    /// `CHRONICLE_SERVER`) hands the command back once and is then refused, not run for ever.
    @Test func theEverydayToolAsItsOwnServerIsRefused() async throws {
        let result = try await runChronicle(["serve", "--port", "0"], environment: ["CHRONICLE_SERVER": try chronicleExecutable().path])
        #expect(result.status == 2)
        #expect(result.stderr.contains("handed the command back"), "\(result.stderr)")
    }

    /// Only absolute `PATH` entries are searched (`.` or `bin` would run what the current
    /// directory holds), and a directory of that name is passed over.
    @Test func theSearchTakesAbsoluteEntriesAndFilesOnly() async throws {
        try await withFakeServer { server, directory in
            let alone = directory.appendingPathComponent("alone")
            try FileManager.default.createDirectory(at: alone, withIntermediateDirectories: true)
            let tool = alone.appendingPathComponent("chronicle")
            try FileManager.default.copyItem(at: try chronicleExecutable(), to: tool)
            // A checkout that plants bin/chronicle-server, with `bin` on PATH.
            let planted = directory.appendingPathComponent("checkout/bin")
            try FileManager.default.createDirectory(at: planted, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: server, toPath: planted.appendingPathComponent("chronicle-server").path)
            let relative = try await runTool(
                at: tool.path, ["serve"], environment: ["PATH": "bin:/usr/bin:/bin"], in: directory.appendingPathComponent("checkout").path)
            #expect(relative.status == 2 && !relative.stdout.contains("ran:"), "\(relative.stdout)")
            // A directory named chronicle-server first on PATH, the real one after it.
            let decoy = directory.appendingPathComponent("decoy/chronicle-server")
            try FileManager.default.createDirectory(at: decoy, withIntermediateDirectories: true)
            let found = try await runTool(
                at: tool.path, ["serve"], environment: ["PATH": "\(decoy.deletingLastPathComponent().path):\(planted.path):/usr/bin:/bin"])
            #expect(found.status == 7 && found.stdout == "ran: serve\n", "\(found.stderr)")
        }
    }
}
