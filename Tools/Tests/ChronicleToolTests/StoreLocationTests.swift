import Chronicle
import Foundation
import Testing
import ToolsTestSupport

/// Where `Store.standard` and `bootstrap(appID:)` keep an app's store, seen through the tool's
/// `--app`: the platform's application-support directory (`$XDG_DATA_HOME` on Linux), or
/// `$CHRONICLE_HOME` when set.
struct StoreLocationTests {
    @Test func anAppsStoreLivesUnderTheApplicationSupportDirectory() async throws {
        let directories = Directories()
        let data = directories.make()
        let set = try await runChronicle(["set", "settings.theme", "dark", "--app", "com.example.located"], environment: ["XDG_DATA_HOME": data.path])
        #expect(set.status == 0, "\(set.stderr)")
        let store = data.appendingPathComponent("chronicle/com.example.located")
        #expect(FileManager.default.fileExists(atPath: store.appendingPathComponent("data.mdb").path))
        let get = try await runChronicle(["get", "settings.theme", "--store", store.path])
        #expect(get.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == #""dark""# || get.stdout.contains("dark"))
    }

    @Test func chronicleHomeWins() async throws {
        let directories = Directories()
        let home = directories.make()
        let data = directories.make()
        let set = try await runChronicle(
            ["set", "settings.theme", "dark", "--app", "com.example.located"],
            environment: ["XDG_DATA_HOME": data.path, "CHRONICLE_HOME": home.path])
        #expect(set.status == 0, "\(set.stderr)")
        #expect(FileManager.default.fileExists(atPath: home.appendingPathComponent("data.mdb").path))
        #expect(!FileManager.default.fileExists(atPath: data.appendingPathComponent("chronicle").path))
    }
}
