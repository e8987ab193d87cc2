public import ArgumentParser
@_spi(Tools) public import Chronicle
public import Foundation

/// Options shared by every command that opens a store.
public struct StoreOptions: ParsableArguments {
    public init() {}

    @Option(name: .long, help: ArgumentHelp("The store directory (default: the embedded default store).", valueName: "DIR"))
    var store: String?

    @Option(name: .long, help: ArgumentHelp("Open the store an app bootstrapped with this id.", valueName: "ID"))
    var app: String?

    @Option(name: .long, help: ArgumentHelp("Read the passphrase of a sealed store from this file (or set CHRONICLE_PASSPHRASE).", valueName: "FILE"))
    var passphraseFile: String?

    @Option(name: .long, help: ArgumentHelp("Open a sealed store with this key file.", valueName: "FILE"))
    var keyFile: String?

    public func validate() throws {
        if store != nil && app != nil { throw ValidationError("give --store or --app, not both") }
        if passphraseFile != nil && keyFile != nil { throw ValidationError("give --passphrase-file or --key-file, not both") }
    }

    /// The store's directory.
    public var directory: URL {
        if let store { return URL(fileURLWithPath: store, isDirectory: true) }
        return Store.defaultDirectory(appID: app ?? "chronicle")
    }

    /// The configuration for the key options given.
    public func configuration() throws -> Store.Configuration {
        var configuration = Store.Configuration()
        if let passphraseFile {
            let bytes = try SecretFile.contents(of: URL(fileURLWithPath: passphraseFile), what: "passphrase file")
            configuration.keySource = .passphrase(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .newlines))
        } else if let keyFile {
            configuration.keySource = .keyFile(URL(fileURLWithPath: keyFile))
        } else if let passphrase = ProcessInfo.processInfo.environment["CHRONICLE_PASSPHRASE"], !passphrase.isEmpty {
            configuration.keySource = .passphrase(passphrase)
        }
        return configuration
    }

    /// Opens (or creates) the store.
    public func open() throws -> Store {
        try Store(directory: directory, configuration: configuration())
    }

    /// Opens the store for a command that only reads it: a path with no store is an error,
    /// never a new empty store.
    public func openExisting() throws -> Store {
        guard FileManager.default.fileExists(atPath: directory.appendingPathComponent("data.mdb").path) else {
            throw ChronicleError.invalidArgument("there is no store at \(directory.path) (give --store DIR or --app ID of an existing store)")
        }
        return try open()
    }
}
