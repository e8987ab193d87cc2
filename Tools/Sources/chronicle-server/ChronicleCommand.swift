import ArgumentParser
import Chronicle
import ChronicleCommandLine
import ChronicleHub

/// The server tool: `serve`, `sync` with an HTTP peer, and `hub`. The everyday `chronicle` (the
/// CLI package) runs this for those commands, so users type `chronicle serve` either way.
@main
struct ChronicleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chronicle-server",
        abstract: "Serve a Chronicle store over HTTP(S), sync with a server, and run the multi-tenant hub.",
        discussion: """
            The everyday commands (log, get, set, verify, sync with a store or a folder, …) are \
            `chronicle`'s, which runs this tool for `serve`, `hub` and `sync --peer URL`.

            Exit statuses: 0 success; 2 an error (the message is on stderr); 64 a usage error \
            (unknown command or option, bad value).
            """,
        version: chronicleVersion,
        subcommands: [Serve.self, Sync.self, Hub.self])

    static func main() async {
        await ToolMain.run(Self.self, describe: HubDatabase.describe)
    }
}
