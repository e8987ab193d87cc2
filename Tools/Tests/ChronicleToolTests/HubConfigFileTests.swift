import Foundation
import Testing
import ToolsTestSupport

/// `chronicle hub serve --config FILE`: a JSON file of the command's options, checked before
/// anything starts, under the command line.
@Suite struct HubConfigFileTests {
    /// Writes `text` to a file in a directory of its own and runs `body` with its path.
    func withConfig(_ text: String, _ body: (String) async throws -> Void) async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("hub.json")
        try Data(text.utf8).write(to: file)
        try await body(file.path)
    }

    /// A database no node can reach: a command that gets past its settings fails there (status 2).
    let unreachable = "postgres://chronicle@127.0.0.1:1/chronicle"

    @Test func anUnknownSettingIsAUsageErrorNamingIt() async throws {
        try await withConfig(#"{"prot": 8787}"#) { path in
            let result = try await runChronicle(["hub", "serve", "--config", path, "--database", unreachable])
            #expect(result.status == 64)
            #expect(result.stderr.contains("unknown setting \"prot\"") && result.stderr.contains("port"), "\(result.stderr)")
        }
    }

    @Test func aValueOfTheWrongTypeNamesTheSetting() async throws {
        try await withConfig(#"{"max_connections": "many"}"#) { path in
            let result = try await runChronicle(["hub", "serve", "--config", path, "--database", unreachable])
            #expect(result.status == 64)
            #expect(result.stderr.contains("\"max_connections\" must be a whole number"), "\(result.stderr)")
        }
    }

    /// The node's database pool is a setting (file or option), checked before anything connects.
    @Test func theDatabasePoolSizeIsASettingWithinItsRange() async throws {
        try await withConfig(#"{"database_connections": 0}"#) { path in
            let result = try await runChronicle(["hub", "serve", "--config", path, "--database", unreachable])
            #expect(result.status == 64)
            #expect(result.stderr.contains("database_connections") && result.stderr.contains("1...10000"), "\(result.stderr)")
            let option = try await runChronicle(["hub", "serve", "--database-connections", "20000", "--database", unreachable])
            #expect(option.status == 64)
            #expect(option.stderr.contains("--database-connections is 1...10000"), "\(option.stderr)")
            let accepted = try await runChronicle(["hub", "serve", "--config", path, "--database-connections", "8", "--port", "0", "--database", unreachable])
            #expect(accepted.status == 2, "the option wins over the file, and the database is what fails: \(accepted.stderr)")
        }
    }

    @Test func aFileThatIsNotAJSONObjectOrIsMissingIsRefused() async throws {
        try await withConfig("port = 8787") { path in
            let result = try await runChronicle(["hub", "serve", "--config", path, "--database", unreachable])
            #expect(result.status == 64)
            #expect(result.stderr.contains("is not a JSON object"), "\(result.stderr)")
            let missing = try await runChronicle(["hub", "serve", "--config", path + ".absent", "--database", unreachable])
            #expect(missing.status == 64)
            #expect(missing.stderr.contains("cannot read the configuration file"), "\(missing.stderr)")
        }
    }

    /// The file's settings are checked like the options: plain HTTP off loopback is refused.
    /// The command line wins: `--host 127.0.0.1` gets past it to the (unreachable) database.
    @Test func theCommandLineWinsOverTheFile() async throws {
        try await withConfig(#"{"host": "0.0.0.0", "port": 0, "metrics": false}"#) { path in
            let refused = try await runChronicle(["hub", "serve", "--config", path, "--database", unreachable])
            #expect(refused.status == 64)
            #expect(refused.stderr.contains("plain HTTP on 0.0.0.0"), "\(refused.stderr)")
            let overridden = try await runChronicle(["hub", "serve", "--config", path, "--host", "127.0.0.1", "--database", unreachable])
            #expect(overridden.status == 2, "\(overridden.stderr)")
            #expect(overridden.stderr.contains("127.0.0.1:1"), "\(overridden.stderr)")
        }
    }

    /// Whoever may change the file chooses the address, the TLS key and the database: a file
    /// others may write is refused, as is anything but a regular file.
    @Test func aFileOthersMayWriteIsRefused() async throws {
        try await withConfig(#"{"port": 0}"#) { path in
            try FileManager.default.setAttributes([.posixPermissions: 0o666], ofItemAtPath: path)
            let result = try await runChronicle(["hub", "serve", "--config", path, "--database", unreachable])
            #expect(result.status == 64)
            #expect(result.stderr.contains("chmod go-w"), "\(result.stderr)")
            let directory = try await runChronicle(["hub", "serve", "--config", URL(fileURLWithPath: path).deletingLastPathComponent().path, "--database", unreachable])
            #expect(directory.status == 64)
            #expect(directory.stderr.contains("is not a regular file"), "\(directory.stderr)")
        }
    }

    /// A number that is not whole, two database settings, or half a TLS pair from each place.
    @Test func mixedOrMalformedSettingsNameThemselves() async throws {
        try await withConfig(#"{"port": 8787.5}"#) { path in
            let result = try await runChronicle(["hub", "serve", "--config", path, "--database", unreachable])
            #expect(result.status == 64)
            #expect(result.stderr.contains("\"port\" must be a whole number"), "\(result.stderr)")
        }
        try await withConfig(#"{"database": "postgres://a@127.0.0.1:1/a", "database_file": "database"}"#) { path in
            let result = try await runChronicle(["hub", "serve", "--config", path])
            #expect(result.status == 64)
            #expect(result.stderr.contains("not both"), "\(result.stderr)")
        }
        try await withConfig(#"{"tls_cert": "cert.pem", "tls_key": "key.pem"}"#) { path in
            // The command line's certificate with the file's key: refused, never paired.
            let result = try await runChronicle(["hub", "serve", "--config", path, "--tls-cert", "/elsewhere/cert.pem", "--database", unreachable])
            #expect(result.status == 64)
            #expect(result.stderr.contains("HTTPS needs both"), "\(result.stderr)")
        }
        try await withConfig(#"{"max_wait_seconds": 0}"#) { path in
            let result = try await runChronicle(["hub", "serve", "--config", path, "--database", unreachable])
            #expect(result.status == 64)
            #expect(result.stderr.contains("\"max_wait_seconds\" in"), "\(result.stderr)")
        }
    }

    /// The file's switches can be turned back on the command line: `--no-insecure` over the
    /// file's `"insecure": true` refuses plain HTTP off loopback again.
    @Test func theFilesSwitchesCanBeUndoneOnTheCommandLine() async throws {
        try await withConfig(#"{"host": "0.0.0.0", "insecure": true, "metrics": false}"#) { path in
            let allowed = try await runChronicle(["hub", "serve", "--config", path, "--database", unreachable])
            #expect(allowed.status == 2, "past the settings, to the unreachable database: \(allowed.stderr)")
            let refused = try await runChronicle(["hub", "serve", "--config", path, "--no-insecure", "--database", unreachable])
            #expect(refused.status == 64)
            #expect(refused.stderr.contains("plain HTTP on 0.0.0.0"), "\(refused.stderr)")
        }
    }

    /// A database URL with a password belongs in a 0600 file, not in the configuration file.
    @Test func aPasswordInTheFilesDatabaseURLIsRefused() async throws {
        try await withConfig(#"{"database": "postgres://chronicle:s3cret@127.0.0.1:1/chronicle"}"#) { path in
            let result = try await runChronicle(["hub", "serve", "--config", path], environment: ["CHRONICLE_HUB_DATABASE": ""])
            #expect(result.status == 64)
            #expect(result.stderr.contains("database_file") && !result.stderr.contains("s3cret"), "\(result.stderr)")
        }
    }

    /// `database_file` is read relative to the configuration file, and must be 0600 like `--database-file`.
    @Test func theDatabaseFileIsRelativeToTheConfigurationAndPrivate() async throws {
        try await withConfig(#"{"database_file": "database", "metrics": false}"#) { path in
            let database = URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent("database")
            try Data(unreachable.utf8).write(to: database)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: database.path)
            let open = try await runChronicle(["hub", "serve", "--config", path], environment: ["CHRONICLE_HUB_DATABASE": ""])
            #expect(open.status == 2)
            #expect(open.stderr.contains(database.path) && open.stderr.contains("chmod 600"), "\(open.stderr)")
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: database.path)
            let unreachable = try await runChronicle(["hub", "serve", "--config", path], environment: ["CHRONICLE_HUB_DATABASE": ""])
            #expect(unreachable.status == 2)
            #expect(unreachable.stderr.contains("127.0.0.1:1"), "\(unreachable.stderr)")
        }
    }
}
