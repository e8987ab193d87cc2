import ArgumentParser
import Chronicle

extension ChronicleCommand {
    struct SetValue: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Set a key: VALUE is JSON, else a string.",
            discussion: "Example: chronicle set settings.theme dark --store ./store")

        @OptionGroup var options: StoreOptions
        @Argument(help: "The key name.") var key: String
        @Argument(help: "The value: JSON (true, 3, 2.5, \"x\", {...}), else a string.") var value: String

        func run() throws {
            try options.open().setValue(fromText: value, forKeyNamed: key)
        }
    }
}
