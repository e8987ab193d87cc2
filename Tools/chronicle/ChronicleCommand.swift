import ArgumentParser
import Chronicle

@main
struct ChronicleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chronicle",
        abstract: "Read, replay, verify, sync and change a Chronicle store.",
        discussion: """
            Every command takes --store DIR (default: the embedded default store, $CHRONICLE_HOME or
            ~/.local/share/chronicle/chronicle) or --app ID (the store an app bootstrapped with that id).
            Sealed stores need --passphrase-file FILE, CHRONICLE_PASSPHRASE or --key-file FILE.
            Errors go to stderr with a non-zero exit status.
            """,
        subcommands: [
            Demo.self, Log.self, Replay.self, Get.self, SetValue.self, Remove.self, KeysCommand.self, Verify.self,
            Export.self, Import.self, Serve.self, Sync.self, Compact.self, Stats.self, Quarantine.self,
        ]
    )
}
