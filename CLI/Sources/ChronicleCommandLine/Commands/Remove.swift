import ArgumentParser
@_spi(Tools) import Chronicle

extension EverydayCommands {
    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Remove a key (appends a tombstone).",
            discussion: """
                Exits with status 1 and writes nothing when the key has no value in this store (never \
                set, or removed already): sync first to remove a value another device set.

                Example: chronicle rm editor.draft --store ./store
                """)

        @OptionGroup var options: StoreOptions
        @Argument(help: "The key name.") var key: String
        @Flag(help: "Remove the secret of this name.") var secret = false

        func run() throws {
            guard try KeysByName(options.openExisting()).removeValue(forKeyNamed: key, secret: secret) else {
                printError("\(terminalSafe(key)): no value here; nothing removed")
                throw ExitCode.noSuchKey
            }
        }
    }
}
