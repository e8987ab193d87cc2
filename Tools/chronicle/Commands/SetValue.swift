import ArgumentParser
import Chronicle
import Foundation

extension ChronicleCommand {
    struct SetValue: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Set a key: VALUE is JSON, else a string.",
            discussion: """
                VALUE - reads the value from standard input (a secret never appears in `ps` or the shell history).

                Examples:
                  chronicle set settings.theme dark --store ./store
                  chronicle set api.token - --store ./store < token.txt
                """)

        @OptionGroup var options: StoreOptions
        @Argument(help: "The key name.") var key: String
        @Argument(help: "The value: JSON (true, 3, 2.5, \"x\", {...}), else a string; - reads it from standard input.") var value: String

        func run() throws {
            var text = value
            if value == "-" {
                let input = FileHandle.standardInput.readDataToEndOfFile()
                text = String(decoding: input, as: UTF8.self)
                if text.hasSuffix("\n") { text.removeLast() }  // the newline `echo` or a file adds
            }
            try options.open().setValue(fromText: text, forKeyNamed: key)
        }
    }
}
