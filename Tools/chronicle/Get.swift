import ArgumentParser
import Chronicle

struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the current value of a key (JSON where the value is structured).",
        discussion: "Exits with status 1 when the key has no value.\n\nExample: chronicle get settings.theme --store ./store")

    @OptionGroup var options: StoreOptions
    @Argument(help: "The key name.") var key: String

    func run() throws {
        guard let json = try options.open().currentValueJSON(forKeyNamed: key) else {
            printError("\(key): no value")
            throw ExitCode(1)
        }
        print(json)
    }
}

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

struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm", abstract: "Remove a key (appends a tombstone).",
        discussion: "Example: chronicle rm editor.draft --store ./store")

    @OptionGroup var options: StoreOptions
    @Argument(help: "The key name.") var key: String

    func run() throws {
        try options.open().removeValue(forKeyNamed: key)
    }
}
