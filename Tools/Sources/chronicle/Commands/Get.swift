import ArgumentParser
@_spi(Tools) import Chronicle

extension ChronicleCommand {
    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the current value of a key (JSON where the value is structured).",
            discussion: "Exits with status 1 when the key has no value (2 on errors).\n\nExample: chronicle get settings.theme --store ./store")

        @OptionGroup var options: StoreOptions
        @Argument(help: "The key name.") var key: String

        func run() throws {
            guard let json = try options.openExisting().currentValueJSON(forKeyNamed: key) else {
                printError("\(terminalSafe(key)): no value")
                throw ExitCode.noSuchKey
            }
            print(jsonSafe(json))
        }
    }
}
