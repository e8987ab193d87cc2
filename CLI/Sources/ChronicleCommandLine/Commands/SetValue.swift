public import ArgumentParser
@_spi(Tools) public import Chronicle
import Foundation

extension ValueKind: @retroactive ExpressibleByArgument {}

extension EverydayCommands {
    struct SetValue: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Set a key: VALUE is JSON, else a string.",
            discussion: """
                VALUE - reads the value from standard input (a secret never appears in `ps` or the shell \
                history).

                Examples:
                  chronicle set settings.theme dark --store ./store
                  chronicle set --secret api.token - --store ./store < token.txt
                  chronicle set volume 1 --type double --store ./store
                  chronicle set lastSync 2026-11-22T09:30:00Z --type date --store ./store

                --type stores the value as the type the app's key has (bool, int, double, string, date, \
                url, data as base64, json); what `chronicle get` prints sets the same value back.

                The key keeps the sync policy it has; a new key stays on this device unless --sync \
                (never, manual, automaticSmall) says otherwise. --secret seals the value with the store's \
                key (an app reads it through a SecretKey), and takes it only as -, from standard input: a \
                value on the command line shows in `ps` and the shell history.
                """)

        @OptionGroup var options: StoreOptions
        @Argument(help: "The key name.") var key: String
        @Argument(help: "The value: JSON (true, 3, 2.5, \"x\", {...}), else a string; - reads it from standard input.") var value: String
        @Option(help: "Store the value as this type: \(ValueKind.allCases.map(\.rawValue).joined(separator: ", ")).") var type: ValueKind?
        @Option(help: "The key's sync policy: never, manual, automaticSmall; default: the policy it has, else never.") var sync: String?
        @Flag(help: "Set the secret of this name, sealed with the store's key.") var secret = false

        func validate() throws {
            if secret, value != "-" {
                throw ValidationError(
                    "a secret is read from standard input: give - as the value (chronicle set --secret \(terminalSafe(key)) - < file); "
                        + "a value on the command line shows in `ps` and the shell history")
            }
            if let sync, !SyncPolicy.allCases.contains(where: { $0.description == sync }) {
                throw ValidationError("unknown sync policy \(terminalSafe(sync)) (never, manual, automaticSmall)")
            }
        }

        func run() throws {
            var text = value
            if value == "-" {
                let input = FileHandle.standardInput.readDataToEndOfFile()
                text = String(decoding: input, as: UTF8.self)
                if text.hasSuffix("\n") { text.removeLast() }  // the newline `echo` or a file adds
            }
            let policy = SyncPolicy.allCases.first { $0.description == sync }
            try KeysByName(options.open()).setValue(fromText: text, forKeyNamed: key, as: type, policy: policy, secret: secret)
        }
    }
}
