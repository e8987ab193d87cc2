import ArgumentParser
import Chronicle
import ChronicleCommandLine

/// The everyday tool: a store's log, values, keys, checks, imports and exports, compaction and
/// sync with another store or a shared folder. `serve`, `hub` and HTTP `sync` run
/// `chronicle-server` (the Tools package), so this builds without the network stack.
@main
struct ChronicleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chronicle",
        abstract: "Read, replay, verify, sync and change a Chronicle store.",
        discussion: EverydayCommands.discussion,
        version: chronicleVersion,
        subcommands: EverydayCommands.all + [ServerCommand.Serve.self, ServerCommand.Hub.self])

    static func main() async {
        await ToolMain.run(Self.self, dispatchesToServer: true)
    }
}
