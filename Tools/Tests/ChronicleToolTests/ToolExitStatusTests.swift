import Chronicle
import ChronicleTesting
import Foundation
import Testing
import ToolsTestSupport

/// The documented exit statuses: 0 ok, 1 no such key or damage found, 2 an error, 64 usage.
struct ToolExitStatusTests {
    /// `rm` of a key with no value used to succeed and leave a tombstone in the log for good.
    @Test func removingAKeyWithNoValueWritesNothingAndExitsOne() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let set = try await runChronicle(["set", "present", "1", "--store", directory.path])
        #expect(set.status == 0, "\(set.stderr)")
        let never = try await runChronicle(["rm", "never.set", "--store", directory.path])
        #expect(never.status == 1)
        #expect(never.stderr.contains("never.set: no value here; nothing removed"), "\(never.stderr)")
        #expect(never.stderr.contains("Usage") == false)
        let removed = try await runChronicle(["rm", "present", "--store", directory.path])
        #expect(removed.status == 0, "\(removed.stderr)")
        let again = try await runChronicle(["rm", "present", "--store", directory.path])
        #expect(again.status == 1, "removed already")
        let log = try await runChronicle(["log", "--json", "--store", directory.path])
        #expect(log.stdout.split(separator: "\n").count == 2, "one set, one remove: \(log.stdout)")
    }

    /// `verify` of a keyed store without its key used to exit 1, "not sound", for a store that is.
    @Test func verifyWithoutTheKeyIsAnErrorNotAFinding() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let set = try await runChronicle(["set", "a", "1", "--store", directory.path], environment: ["CHRONICLE_PASSPHRASE": "pw"])
        #expect(set.status == 0, "\(set.stderr)")
        let keyless = try await runChronicle(["verify", "--store", directory.path])
        #expect(keyless.status == 2)
        #expect(keyless.stderr.contains("key source"), "\(keyless.stderr)")
        let keyed = try await runChronicle(["verify", "--store", directory.path], environment: ["CHRONICLE_PASSPHRASE": "pw"])
        #expect(keyed.status == 0, "\(keyed.stderr)")
    }

    /// A failed sync is said once, in words: no warning log line beside the error, no NIO type.
    @Test func aFailedSyncIsSaidOnce() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(try await runChronicle(["set", "k", "1", "--sync", "manual", "--store", directory.path]).status == 0)
        let result = try await runChronicle(
            ["sync", "--peer", "http://127.0.0.1:1", "--store", directory.path], environment: ["CHRONICLE_TOKEN": "t"])
        #expect(result.status == 2)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(result.stderr)")
        #expect(result.stderr.contains("connection refused") && !result.stderr.contains("IOError"), "\(result.stderr)")
    }
}
