@testable import Chronicle
@testable import ChronicleFormat
import ChronicleTesting
import Foundation
import Testing
import ToolsTestSupport

struct ToolTests {
    /// A store with a known history, made through the tool itself.
    func fixture(_ directory: URL) async throws {
        for arguments in [
            ["set", "settings.theme", "dark", "--sync", "automaticSmall"], ["set", "stats.launches", "3", "--sync", "automaticSmall"],
            ["set", "user.profile", #"{"name":"Ada","tags":["x"]}"#, "--sync", "automaticSmall"],
            ["set", "settings.theme", "light"], ["rm", "stats.launches"],
        ] {
            let result = try await runChronicle(arguments + ["--store", directory.path])
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
        }
    }

    @Test func logHumanFormatMatchesGoldenOutput() async throws {
        try await withTemporaryStore { _, directory async throws in
            try await fixture(directory)
            let log = try await runChronicle(["log", "--store", directory.path])
            #expect(log.status == 0)
            let golden = """
                1\t<date>\t<short>\tdefaults\tsettings.theme\tset\t"dark"
                2\t<date>\t<short>\tdefaults\tstats.launches\tset\t3
                3\t<date>\t<short>\tdefaults\tuser.profile\tset\t{"name":"Ada","tags":["x"]}
                4\t<date>\t<short>\tdefaults\tsettings.theme\tset\t"light"
                5\t<date>\t<short>\tdefaults\tstats.launches\tremove\t(removed)

                """
            #expect(normalized(log.stdout) == golden)

            let keys = try await runChronicle(["keys", "--store", directory.path])
            let keysGolden = """
                KEY                       DOMAIN    POLICY          SIZE  REVISIONS  LAST WRITER  CHANGED  SEALED
                settings.theme            defaults  automaticSmall  5     2          <short>     <date>  no
                stats.launches (removed)  defaults  automaticSmall  0     2          <short>     <date>  no
                user.profile              defaults  automaticSmall  27    1          <short>     <date>  no

                """
            #expect(normalized(keys.stdout).replacingOccurrences(of: "CHANGED               ", with: "CHANGED  ") == keysGolden)
        }
    }

    @Test func jsonOutputParses() async throws {
        try await withTemporaryStore { _, directory async throws in
            try await fixture(directory)
            let log = try await runChronicle(["log", "--json", "--key", "settings.theme", "--store", directory.path])
            let lines = log.stdout.split(separator: "\n")
            #expect(lines.count == 2)
            for line in lines {
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                for field in ["sequence", "origin", "writer", "counter", "timestamp", "domain", "key", "op", "policy", "sealed", "value"] {
                    #expect(object[field] != nil, "missing \(field)")
                }
            }
            let last = try #require(try JSONSerialization.jsonObject(with: Data(lines[1].utf8)) as? [String: Any])
            #expect(last["value"] as? String == "light")
            let keys = try await runChronicle(["keys", "--json", "--store", directory.path])
            #expect(keys.stdout.split(separator: "\n").count == 3)
            let get = try await runChronicle(["get", "user.profile", "--store", directory.path])
            let profile = try #require(try JSONSerialization.jsonObject(with: Data(get.stdout.utf8)) as? [String: Any])
            #expect(profile["name"] as? String == "Ada")
        }
    }

    @Test func sealedValuesNeverPrint() async throws {
        let marker = "TOOL-SECRET-\(UUID().uuidString)"
        try await withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, directory async throws in
            try store.set(marker, for: .apiToken)
            let passphraseFile = directory.appendingPathComponent("../pw-\(UUID().uuidString)").standardizedFileURL
            try Data("pw\n".utf8).write(to: passphraseFile)
            defer { try? FileManager.default.removeItem(at: passphraseFile) }
            // A passphrase file others can read is refused, with the fix in the message.
            let open = try await runChronicle(["stats", "--store", directory.path, "--passphrase-file", passphraseFile.path])
            #expect(open.status != 0 && open.stderr.contains("chmod 600"), "\(open.stderr)")
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: passphraseFile.path)
            for arguments in [["log"], ["log", "--json"], ["keys"], ["keys", "--json"], ["stats"], ["verify"]] {
                let result = try await runChronicle(arguments + ["--store", directory.path, "--passphrase-file", passphraseFile.path])
                #expect(result.status == 0, "\(arguments): \(result.stderr)")
                #expect(!result.stdout.contains(marker) && !result.stderr.contains(marker))
            }
        }
    }

    @Test func pointInTimeReplay() async throws {
        try await withTemporaryStore { store, directory async throws in
            try await fixture(directory)
            let into = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: into) }
            let result = try await runChronicle(["replay", "--until", "3", "--into", into.path, "--store", directory.path])
            #expect(result.status == 0, "\(result.stderr)")
            let past = try await runChronicle(["get", "settings.theme", "--store", into.path])
            #expect(past.stdout.contains("dark"))
            let launches = try await runChronicle(["get", "stats.launches", "--store", into.path])
            #expect(launches.stdout.contains("3"))
            #expect(store[Key<String>("settings.theme", default: "", sync: .automaticSmall)] == "light")  // the original is untouched
            let copy = try Store(directory: into)
            #expect(try copy.replicaID != store.replicaID)
            #expect(try copy.logEntries().map(\.origin).allSatisfy { $0 == (try store.replicaID) })
            #expect(try copy.verify().isSound)
            let again = try await runChronicle(["replay", "--until", "3", "--into", into.path, "--store", directory.path])
            #expect(again.status != 0)  // refuses a non-empty directory
        }
    }

    @Test func exportImportRoundTrip() async throws {
        try await withTemporaryStore { _, directory async throws in
            try await fixture(directory)
            let file = temporaryDirectory().appendingPathExtension("range")
            defer { try? FileManager.default.removeItem(at: file) }
            #expect(try await runChronicle(["export", "--from", "2", "--to", "4", file.path, "--store", directory.path]).status == 0)
            let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
            #expect(mode == 0o600)  // an export holds every syncable value and the wrapped keys
            try await withTemporaryStore { other, otherDirectory async throws in
                let imported = try await runChronicle(["import", file.path, "--store", otherDirectory.path])
                #expect(imported.status == 0, "\(imported.stderr)")
                #expect(imported.stdout.contains("applied 3"))
                #expect(other[Key<Int>("stats.launches", default: 0, sync: .automaticSmall)] == 3)
                #expect(other[Key<String>("settings.theme", default: "", sync: .automaticSmall)] == "light")
                #expect(try await runChronicle(["import", file.path, "--store", otherDirectory.path]).stdout.contains("duplicates 3"))
                try Data("garbage".utf8).write(to: file)
                let bad = try await runChronicle(["import", file.path, "--store", otherDirectory.path])
                #expect(bad.status != 0)
                #expect(bad.stderr.contains("malformed"))
            }
        }
    }

    @Test func exitStatusesAndErrors() async throws {
        try await withTemporaryStore(configuration: passphraseConfiguration("right")) { store, directory async throws in
            try store.set("x", for: .apiToken)
            let wrong = try await runChronicle(["stats", "--store", directory.path], environment: ["CHRONICLE_PASSPHRASE": "wrong"])
            #expect(wrong.status != 0)
            #expect(wrong.stderr.contains("passphrase or key file"))
            let badFlag = try await runChronicle(["log", "--since", "yesterday-ish", "--store", directory.path])
            #expect(badFlag.status != 0)
            #expect(badFlag.stderr.contains("ISO 8601"))
            let unknown = try await runChronicle(["frobnicate"])
            #expect(unknown.status != 0)
        }
        let notAStore = temporaryDirectory()
        try FileManager.default.createDirectory(at: notAStore, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: notAStore) }
        try Data(repeating: 0x5A, count: 65536).write(to: notAStore.appendingPathComponent("data.mdb"))
        let bad = try await runChronicle(["stats", "--store", notAStore.path])
        #expect(bad.status != 0)
        #expect(bad.stderr.contains("storage error"))
        for command in ["log", "replay", "get", "set", "rm", "keys", "verify", "export", "import", "compact", "stats", "demo"] {
            let help = try await runChronicle([command, "--help"])
            #expect(help.status == 0 && help.stdout.contains("--store"), "\(command) --help")
        }
    }

    @Test func readOnlyCommandsNeverCreateAStoreAndStatusesAreDistinct() async throws {
        let missing = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: missing) }
        for command in [["get", "some.key"], ["log"], ["keys"], ["stats"], ["verify"]] {
            let result = try await runChronicle(command + ["--store", missing.path])
            #expect(result.status == 2, "\(command): \(result.status)")
            #expect(result.stderr.contains("there is no store"), "\(command): \(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: missing.path))
        let version = try await runChronicle(["--version"])
        #expect(version.status == 0 && version.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == chronicleVersion)
        let help = try await runChronicle(["--help"])
        #expect(help.stdout.contains("Exit statuses"))
        try await withTemporaryStore { store, directory async throws in
            store[.theme] = .dark
            let absent = try await runChronicle(["get", "no.such.key", "--store", directory.path])
            #expect(absent.status == 1)
            let usage = try await runChronicle(["get", "--store", directory.path, "--no-such-flag"])
            #expect(usage.status == 64)
            // A value from standard input: never in `ps` or the shell history.
            let set = try await runChronicle(["set", "api.note", "-", "--store", directory.path], input: "from stdin\n")
            #expect(set.status == 0, "\(set.stderr)")
            #expect(store[Key<String>("api.note", default: "", sync: .automaticSmall)] == "from stdin")
        }
        try await withTemporaryStore(configuration: passphraseConfiguration("right")) { store, directory async throws in
            try store.set("x", for: .apiToken)
            let wrong = try await runChronicle(["stats", "--store", directory.path], environment: ["CHRONICLE_PASSPHRASE": "wrong"])
            #expect(wrong.status == 2)
        }
    }

    /// Key names and JSON values from peers used to reach the terminal raw: escapes that recolour
    /// or clear it, and newlines that fake extra JSON lines.
    @Test func namesAndValuesFromPeersCannotSteerTheTerminal() async throws {
        try await withTemporaryStores(2) { stores in
            let (peer, local) = (stores[0], stores[1])
            let evilName = "evil\u{1B}[2J\u{9B}31m"
            peer[Key<String>(evilName, default: "", sync: .automaticSmall)] = "x\u{9B}1m\u{1B}]0;pwned\u{07}"
            peer[Key<Int>("sync.json", default: 0, sync: .automaticSmall)] = 1
            var range = try EventRange(decoding: Array(try peer.exportRange(after: 0)))
            range.events[1].encoding = ValueEncoding.json.rawValue
            range.events[1].payload = Array("1\n{\"sequence\":999,\"key\":\"fake\"}".utf8)
            _ = try local.importRange(Data(range.encoded()))
            let directory = local.directory.path
            for arguments in [["log"], ["log", "--json"], ["keys"], ["keys", "--json"]] {
                let result = try await runChronicle(arguments + ["--store", directory])
                #expect(result.status == 0, "\(arguments): \(result.stderr)")
                let bad = result.stdout.unicodeScalars.filter { ($0.value < 0x20 && $0 != "\n" && $0 != "\t") || (0x7F...0x9F).contains($0.value) }
                #expect(bad.isEmpty, "\(arguments) printed control characters")
                let lines = result.stdout.split(separator: "\n")
                #expect(!lines.contains { $0.contains("\"sequence\":999") }, "\(arguments) printed a fake line")
                if arguments.contains("--json") {
                    for line in lines { #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "not JSON: \(line)") }
                }
            }
        }
    }

    @Test func compactKeepsCurrentValuesAndVerify() async throws {
        try await withTemporaryStore { store, directory async throws in
            for i in 0..<50 { store[.launches] = i }
            store[.theme] = .dark
            try store.remove(.draft)
            store[.draft] = "kept"
            let before = try store.catalog().map { "\($0.name)=\($0.isRemoved)" }
            let result = try await runChronicle(["compact", "--before", "2999-01-01", "--store", directory.path])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("dropped"))
            #expect(store[.launches] == 49 && store[.theme] == .dark && store[.draft] == "kept")
            #expect(try store.catalog().map { "\($0.name)=\($0.isRemoved)" } == before)
            #expect(try store.verify().isSound)
            #expect(try store.logEntries().count == 3)
            // Dropped events are never imported again.
            try await withTemporaryStore { other, _ async throws in
                _ = try other.importRange(try store.exportRange(after: 0))
                _ = try store.importRange(try other.exportRange(after: 0))
                #expect(try store.logEntries().count == 3)
            }
        }
    }

    @Test func quarantineIsListedCountedAndDropped() async throws {
        try await withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, directory async throws in
            try store.set("kept", for: SecretKey<String?>("tool.secret", sync: .manual))
            var range = try EventRange(decoding: Array(try store.exportRange(after: 0)))
            range.events[0].origin = ReplicaID.random()
            range.events[0].op = .remove
            range.keys = []  // travel-wrapped at the tests' cost, which the tool (at MODERATE) would refuse too
            let file = directory.deletingLastPathComponent().appendingPathComponent("forged-\(UUID().uuidString).range")
            defer { try? FileManager.default.removeItem(at: file) }
            try Data(range.encoded()).write(to: file)
            let environment = ["CHRONICLE_PASSPHRASE": "pw"]
            let imported = try await runChronicle(["import", "--store", directory.path, file.path], environment: environment)
            #expect(imported.status == 0 && imported.stdout.contains("quarantined 1"), "\(imported.stdout)\(imported.stderr)")
            let listed = try await runChronicle(["quarantine", "--store", directory.path, "--json"], environment: environment)
            let line = try #require(listed.stdout.split(separator: "\n").first)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(object["reason"] as? String == "not authenticated by a member of this sync group")
            #expect(object["reasonCode"] as? Int == 1)  // FORMAT.md 11's number: what scripts match on
            #expect(object["key"] as? String == "tool.secret" && object["sealed"] as? Bool == true)
            #expect((object["source"] as? String)?.hasPrefix("file ") == true)
            #expect(!listed.stdout.contains("kept"))
            let stats = try await runChronicle(["stats", "--store", directory.path], environment: environment)
            #expect(stats.stdout.contains("quarantined") && stats.stdout.contains(" 1"))
            let dropped = try await runChronicle(["quarantine", "--store", directory.path, "--drop-all"], environment: environment)
            #expect(dropped.stdout.contains("dropped 1"))
            #expect(try store.quarantinedItems().isEmpty)
            #expect(try store.value(for: SecretKey<String?>("tool.secret", sync: .manual)) == "kept")
        }
    }
}
