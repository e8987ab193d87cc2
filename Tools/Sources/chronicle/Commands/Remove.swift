import ArgumentParser
@_spi(Tools) import Chronicle

extension ChronicleCommand {
    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Remove a key (appends a tombstone).",
            discussion: "Example: chronicle rm editor.draft --store ./store")

        @OptionGroup var options: StoreOptions
        @Argument(help: "The key name.") var key: String

        func run() throws {
            try options.openExisting().removeValue(forKeyNamed: key)
        }
    }
}
