import ArgumentParser
import Chronicle

@main
struct ChronicleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chronicle",
        abstract: "Read, replay, verify and change a Chronicle store.",
        discussion: """
            Every command takes --store DIR (default: the embedded default store) or --app ID.
            Errors go to stderr with a non-zero exit status.
            """,
        subcommands: [Demo.self, Get.self, SetValue.self, Remove.self, Log.self, Verify.self, Replay.self]
    )
}
