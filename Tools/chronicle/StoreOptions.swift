import ArgumentParser
import Chronicle
import Foundation

/// Options shared by every command that opens a store.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: "The store directory (default: the embedded default store).")
    var store: String?

    @Option(name: .long, help: "Open the store an app bootstrapped with this id.")
    var app: String?

    func validate() throws {
        if store != nil && app != nil { throw ValidationError("give --store or --app, not both") }
    }

    var directory: URL {
        if let store { return URL(fileURLWithPath: store, isDirectory: true) }
        return Store.defaultDirectory(appID: app ?? "chronicle")
    }

    func open() throws -> Store {
        try Store(directory: directory)
    }
}

/// Prints to standard error.
func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
