import ArgumentParser
@_spi(Tools) import Chronicle
import Foundation
import CChronicleSystem
import ChronicleHub

/// Makes this process undumpable: no core file, and no other process of the same user may attach
/// to read its memory (a `serve` holds the bearer token; most commands hold a passphrase or key).
func keepSecretsOutOfCoreDumps() {
    _ = chronicle_make_undumpable()
}

@main
struct ChronicleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chronicle",
        abstract: "Read, replay, verify, sync and change a Chronicle store.",
        discussion: """
            Every command takes --store DIR (default: the embedded default store, $CHRONICLE_HOME or \
            ~/.local/share/chronicle/chronicle) or --app ID (the store an app bootstrapped with that id). \
            Commands that only read (get, log, keys, stats, verify, replay, export, quarantine) and rm and \
            compact refuse a path that holds no store rather than create one. Sealed stores need \
            --passphrase-file FILE, CHRONICLE_PASSPHRASE or --key-file FILE.

            Exit statuses: 0 success; 1 `get` or `rm` found no value for the key, or `verify` found \
            damage; 2 an error (a store that cannot be opened or is damaged, a wrong key, a refused file, \
            a failed sync; the message is on stderr); 64 a usage error (unknown command or option, bad value).
            """,
        version: chronicleVersion,
        subcommands: [
            Demo.self, Log.self, Replay.self, Get.self, SetValue.self, Remove.self, KeysCommand.self, Verify.self,
            Export.self, Import.self, ImportPlist.self, Serve.self, Sync.self, Compact.self, PurgeHistory.self, Salvage.self, Stats.self,
            Quarantine.self,
            Hub.self,
        ]
    )

    /// Runs the command; errors other than the parser's own exit with status 2 (see the discussion).
    static func main() async {
        keepSecretsOutOfCoreDumps()
        do {
            var command = try parseAsRoot()
            ToolLogging.bootstrap(for: command)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            // ExitCode, CleanExit (help, --version) and usage errors keep ArgumentParser's statuses.
            if error is ExitCode || exitCode(for: error) != .failure {
                exit(withError: error)
            }
            printError("Error: " + terminalSafe(ChronicleError.describe(error)))
            Foundation.exit(ExitCode.error.rawValue)
        }
    }
}

extension ExitCode {
    /// `get` found no value for the key.
    static let noSuchKey = ExitCode(1)
    /// Anything went wrong that is not a usage error.
    static let error = ExitCode(2)
}

extension ChronicleError {
    /// The message for any error the tool meets.
    static func describe(_ error: any Error) -> String {
        if let error = error as? ChronicleError { return error.description }
        if let database = HubDatabase.describe(error) { return database }
        return ChronicleCommand.message(for: error)
    }
}
