import ArgumentParser
@_spi(Tools) import Chronicle

extension EverydayCommands {
    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the current value of a key (JSON where the value is structured).",
            discussion: """
                Exits with status 1 when the key has no value (2 on errors). A secret is printed only with \
                --secret, and needs the store's key (--passphrase-file, --key-file or CHRONICLE_PASSPHRASE; \
                a store without a key source uses the default key file).

                Examples:
                  chronicle get settings.theme --store ./store
                  chronicle get --secret api.token --store ./store --passphrase-file pass.txt
                """)

        @OptionGroup var options: StoreOptions
        @Argument(help: "The key name.") var key: String
        @Flag(help: "Print the secret of this name (needs the store's key): only when asked, never by `log`.") var secret = false

        func run() throws {
            let store = try options.openExisting()
            guard let json = try KeysByName(store).currentValueJSON(forKeyNamed: key, secret: secret) else {
                if !secret, try KeysByName(store).hasSecret(named: key) {
                    printError("\(terminalSafe(key)): no plain value; it is a secret: `chronicle get --secret \(terminalSafe(key))` prints it")
                } else {
                    printError("\(terminalSafe(key)): no \(secret ? "secret" : "value")")
                }
                throw ExitCode.noSuchKey
            }
            print(jsonSafe(json))
        }
    }
}
