public import ArgumentParser
@_spi(Tools) import Chronicle
import CChronicleSystem
import Foundation

/// The commands of the everyday tool: they need a store and nothing of the network stack.
public enum EverydayCommands {
    /// The everyday commands in the order the root help lists them; `sync` here takes another
    /// store or a shared folder (an HTTP peer runs `chronicle-server sync`).
    public static let all: [any ParsableCommand.Type] = [
        Demo.self, Log.self, Replay.self, Get.self, SetValue.self, Remove.self, KeysCommand.self, Verify.self,
        Export.self, Import.self, ImportPlist.self, Sync.self, Compact.self, PurgeHistory.self, Salvage.self, Stats.self,
        Quarantine.self,
    ]

    /// What the everyday tool's root help says under its list of commands.
    public static let discussion = """
        Every command takes --store DIR (default: the embedded default store, $CHRONICLE_HOME or \
        ~/.local/share/chronicle/chronicle) or --app ID (the store an app bootstrapped with that id). \
        Commands that only read (get, log, keys, stats, verify, replay, export, quarantine) and rm and \
        compact refuse a path that holds no store rather than create one. Sealed stores need \
        --passphrase-file FILE, CHRONICLE_PASSPHRASE or --key-file FILE.

        `serve`, `hub` and `sync --peer URL` run `chronicle-server` (the Tools package), found beside \
        this executable, at $CHRONICLE_SERVER or on PATH.

        Exit statuses: 0 success; 1 `get` or `rm` found no value for the key, or `verify` found \
        damage; 2 an error (a store that cannot be opened or is damaged, a wrong key, a refused file, \
        a failed sync; the message is on stderr); 64 a usage error (unknown command or option, bad value).
        """
}

extension ExitCode {
    /// `get` found no value for the key.
    public static let noSuchKey = ExitCode(1)
    /// Anything went wrong that is not a usage error.
    public static let error = ExitCode(2)
}

/// How both tools run a command line: secrets kept out of core dumps, logging set up for the
/// command, and every error other than the parser's own reported on stderr with status 2.
public enum ToolMain {
    /// Parses the process's arguments with `root` and runs the command; never returns.
    ///
    /// - Parameters:
    ///   - root: The root command.
    ///   - dispatchesToServer: Whether `serve`, `hub` and `sync --peer URL` replace this process
    ///     with `chronicle-server` (the everyday tool does; `chronicle-server` itself does not).
    ///   - describe: A message for an error this module does not know (the hub's database errors).
    public static func run(
        _ root: any ParsableCommand.Type, dispatchesToServer: Bool = false,
        describe: (any Error) -> String? = { _ in nil }
    ) async -> Never {
        _ = chronicle_make_undumpable()  // no core file, no same-user ptrace: commands hold keys and tokens
        let arguments = Array(CommandLine.arguments.dropFirst())
        if dispatchesToServer, ServerDispatch.needsServer(arguments) {
            do { try ServerDispatch.exec(arguments) } catch {
                printError("Error: " + terminalSafe(ChronicleError.describe(error, root: root, describe)))
                Foundation.exit(ExitCode.error.rawValue)
            }
        }
        do {
            var command = try root.parseAsRoot(arguments)
            ToolLogging.bootstrap(for: command)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            // ExitCode, CleanExit (help, --version) and usage errors keep ArgumentParser's statuses.
            if error is ExitCode || root.exitCode(for: error) != .failure {
                root.exit(withError: error)
            }
            printError("Error: " + terminalSafe(ChronicleError.describe(error, root: root, describe)))
            Foundation.exit(ExitCode.error.rawValue)
        }
        Foundation.exit(0)
    }
}

extension ChronicleError {
    /// The message for any error a tool meets.
    static func describe(_ error: any Error, root: any ParsableCommand.Type, _ describe: (any Error) -> String?) -> String {
        if let error = error as? ChronicleError { return error.description }
        if let known = describe(error) { return known }
        return root.message(for: error)
    }
}
