import Chronicle
import ChronicleTesting
import Foundation
import Testing
import ToolsTestSupport

/// Secrets from the tool: `set --secret` seals, `get --secret` opens (and only then prints),
/// `rm --secret` removes; `log` never shows one, with or without the key.
struct ToolSecretTests {
    /// A secret given on the command line shows in `ps` and the shell history: refused, with
    /// the way to give it, and nothing is written.
    @Test func aSecretOnTheCommandLineIsRefused() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let set = try await runChronicle(["set", "--secret", "api.token", "s3cr3t-token", "--store", directory.path])
        #expect(set.status == 64, "\(set.stdout)\(set.stderr)")
        #expect(set.stderr.contains("chronicle set --secret api.token - < file"), "\(set.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("data.mdb").path))
    }

    @Test func setGetAndRemoveASecretWithTheStoresKey() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = ["CHRONICLE_PASSPHRASE": "correct horse"]
        let set = try await runChronicle(["set", "--secret", "api.token", "-", "--store", directory.path], environment: key, input: "s3cr3t-token\n")
        #expect(set.status == 0, "\(set.stderr)")
        // The app reads it through a SecretKey; the file never holds the plaintext.
        do {
            var configuration = Store.Configuration(keySource: .passphrase("correct horse"))
            configuration.keyDerivationCost = .interactive
            let store = try Store(directory: directory, configuration: configuration)
            #expect(try store.value(for: SecretKey<String?>("api.token")) == "s3cr3t-token")
            #expect(store[Key<String?>("api.token")] == nil, "not a plain value")
        }
        let file = try Data(contentsOf: directory.appendingPathComponent("data.mdb"))
        #expect(file.range(of: Data("s3cr3t-token".utf8)) == nil)

        let get = try await runChronicle(["get", "--secret", "api.token", "--store", directory.path], environment: key)
        #expect(get.status == 0, "\(get.stderr)")
        #expect(get.stdout == "\"s3cr3t-token\"\n")
        // Without --secret it says where the value is, and prints nothing of it.
        let plain = try await runChronicle(["get", "api.token", "--store", directory.path], environment: key)
        #expect(plain.status == 1)
        #expect(plain.stdout.isEmpty && plain.stderr.contains("get --secret api.token"), "\(plain.stderr)")
        // Without the key it cannot be opened: an error, not the value.
        let keyless = try await runChronicle(["get", "--secret", "api.token", "--store", directory.path])
        #expect(keyless.status == 2 && !keyless.stdout.contains("s3cr3t"), "\(keyless.stderr)")
        // log marks it sealed, with or without the key.
        for environment in [key, [:]] {
            let log = try await runChronicle(["log", "--store", directory.path], environment: environment)
            #expect(log.status == 0, "\(log.stderr)")
            #expect(log.stdout.contains("(sealed,") && !log.stdout.contains("s3cr3t"), "\(log.stdout)")
        }
        let removed = try await runChronicle(["rm", "--secret", "api.token", "--store", directory.path], environment: key)
        #expect(removed.status == 0, "\(removed.stderr)")
        let gone = try await runChronicle(["get", "--secret", "api.token", "--store", directory.path], environment: key)
        #expect(gone.status == 1)
    }
}
