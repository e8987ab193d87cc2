@testable import Chronicle
@testable import ChronicleFormat
import ChronicleLMDB
import Foundation
import Subprocess
import SystemPackage
import Testing
import ToolsTestSupport

/// What the `chronicle` process itself promises, seen from outside it.
struct ToolProcessTests {
    /// `chronicle serve` holds the bearer token in memory: the process is undumpable, so no core
    /// file and no other process of its user can read it. Seen in `/proc`: an undumpable
    /// process's entries belong to root, whoever runs it (so, run as root here, the child runs as
    /// `nobody` through `setpriv`).
    @Test func serveIsUndumpable() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let asRoot = getuid() == 0
        let setpriv = "/usr/bin/setpriv"
        if asRoot { try #require(FileManager.default.isExecutableFile(atPath: setpriv), "setpriv (util-linux) runs the child as nobody") }
        let nobody: uid_t = 65_534
        // The token in a folder of the child's own (the tool refuses secrets others could replace).
        let secrets = directory.appendingPathComponent("secrets")
        let storeDirectory = directory.appendingPathComponent("store")
        for folder in [secrets, storeDirectory] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let token = secrets.appendingPathComponent("token")
        try Data("a-token".utf8).write(to: token)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: token.path)
        if asRoot {
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
            for path in [secrets.path, storeDirectory.path, token.path] { try #require(chown(path, nobody, nobody) == 0) }
        }
        let store = storeDirectory.path
        let tool = try chronicleExecutable().path
        let serve = ["serve", "--store", store, "--token-file", token.path, "--port", "0"]
        let (executable, arguments) = asRoot
            ? (setpriv, ["--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", tool] + serve) : (tool, serve)
        let owner = try await Subprocess.run(
            .path(FilePath(executable)), arguments: Arguments(arguments), input: .none, output: .sequence, error: .discarded
        ) { execution -> UInt32? in
            let deadline = Task { try? await Task.sleep(for: hangGuard); try? execution.send(signal: .kill) }
            defer {
                deadline.cancel()
                try? execution.send(signal: .kill)
            }
            for try await line in execution.standardOutput.strings() where line.contains("serving") {
                let attributes = try FileManager.default.attributesOfItem(atPath: "/proc/\(execution.processIdentifier.value)/environ")
                return (attributes[.ownerAccountID] as? NSNumber)?.uint32Value
            }
            return nil
        }.closureResult
        #expect(owner == 0, "the serving process is dumpable: its /proc entries belong to uid \(owner.map(String.init) ?? "?")")
    }

    /// No secret is taken on the command line, where every user of the machine sees it in `ps`.
    @Test func secretsAreNeverTakenOnTheCommandLine() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let sync = try await runChronicle(["sync", "--store", directory.path, "--peer", "http://127.0.0.1:1", "--token", "chr_secret"])
        #expect(sync.status == 64, "\(sync.stderr)")
        let hub = try await runChronicle(["hub", "tenant", "list", "--database", "postgres://chronicle:s3cret@127.0.0.1:1/chronicle"])
        #expect(hub.status == 64)
        #expect(hub.stderr.contains("CHRONICLE_HUB_DATABASE") && !hub.stderr.contains("s3cret"), "\(hub.stderr)")
    }

    /// A hub node off loopback without TLS sends every device's token in the clear: refused
    /// unless the operator says a proxy terminates TLS (`--insecure`).
    @Test func hubServeRefusesPlainHTTPOffLoopback() async throws {
        let result = try await runChronicle(["hub", "serve", "--host", "0.0.0.0", "--database", "postgres://chronicle@127.0.0.1:1/chronicle"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("--tls-cert") && result.stderr.contains("--insecure"), "\(result.stderr)")
    }

    /// `chronicle import` checks a file's size before reading it: a 2 GiB sparse file is refused
    /// at once (it was read whole first), and a missing file is an error (status 2), not a usage one.
    @Test func importChecksTheFileBeforeReadingIt() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let huge = directory.appendingPathComponent("huge.range")
        try makeSparseFile(at: huge, size: 2 << 30)
        let store = directory.appendingPathComponent("store").path
        let refused = try await runChronicle(["import", "--store", store, huge.path])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("at most 268435456 bytes"), "\(refused.stderr)")
        let missing = try await runChronicle(["import", "--store", store, directory.appendingPathComponent("absent.range").path])
        #expect(missing.status == 2, "\(missing.stderr)")
    }

    /// `chronicle set` stores JSON canonical, as FORMAT.md 3.3 says every JSON payload is: object
    /// keys sorted, whatever order they were typed in.
    @Test func setStoresJSONWithSortedKeys() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let set = try await runChronicle(["set", "--store", directory.path, "profile", #"{"z":1,"a":null,"m":{"y":true,"b":[2,1]}}"#])
        #expect(set.status == 0, "\(set.stderr)")
        // The bytes stored (in the log and the view of this unsealed store), not a re-serialization.
        let file = try Data(contentsOf: directory.appendingPathComponent("data.mdb"))
        #expect(file.range(of: Data(#"{"a":null,"m":{"b":[2,1],"y":true},"z":1}"#.utf8)) != nil)
        #expect(file.range(of: Data(#"{"z":1"#.utf8)) == nil, "the text as given is never stored")
    }
}

