import ArgumentParser
@_spi(Tools) import Chronicle
import Foundation

extension EverydayCommands {
    struct ImportPlist: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "import-plist",
            abstract: "Import the values of a property list (a UserDefaults domain, `defaults export`).",
            discussion: """
                One set event per top-level key, in one transaction. Only keys the store has never held \
                are filled, stamped earlier than any change: an import never overwrites what the user \
                set, here or on another device, and a second run adds nothing. Typed keys of the \
                matching type read them at once. Imported keys stay on this device unless --sync says otherwise.

                Examples:
                  chronicle import-plist ~/.config/com.example.app.plist --store ./store
                  chronicle import-plist prefs.plist --name theme --name launches --store ./store
                """)

        @OptionGroup var options: StoreOptions
        @Argument(help: "The property list file (XML or binary).") var file: String
        @Option(name: .customLong("name"), help: "Import only this key (repeat for several); default: every key.") var names: [String] = []
        @Option(help: "The sync policy of the imported keys: never, manual, automaticSmall.") var sync: String = "never"

        func run() throws {
            guard let policy = SyncPolicy.allCases.first(where: { $0.description == sync }) else { throw ValidationError("unknown sync policy \(terminalSafe(sync))") }
            let progress = ProgressLine(label: "import-plist")
            let count = try options.open().importPropertyList(
                at: URL(fileURLWithPath: file), names: names.isEmpty ? nil : names, policy: policy
            ) { done, total in
                progress.update(UInt64(done), of: UInt64(max(total, 1)))
            }
            progress.finish()
            print("imported \(count) value\(count == 1 ? "" : "s")")
        }
    }
}
