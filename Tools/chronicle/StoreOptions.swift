import ArgumentParser
import Chronicle
import Foundation

/// Options shared by every command that opens a store.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The store directory (default: the embedded default store).", valueName: "DIR"))
    var store: String?

    @Option(name: .long, help: ArgumentHelp("Open the store an app bootstrapped with this id.", valueName: "ID"))
    var app: String?

    @Option(name: .long, help: ArgumentHelp("Read the passphrase of a sealed store from this file (or set CHRONICLE_PASSPHRASE).", valueName: "FILE"))
    var passphraseFile: String?

    @Option(name: .long, help: ArgumentHelp("Open a sealed store with this key file.", valueName: "FILE"))
    var keyFile: String?

    func validate() throws {
        if store != nil && app != nil { throw ValidationError("give --store or --app, not both") }
        if passphraseFile != nil && keyFile != nil { throw ValidationError("give --passphrase-file or --key-file, not both") }
    }

    var directory: URL {
        if let store { return URL(fileURLWithPath: store, isDirectory: true) }
        return Store.defaultDirectory(appID: app ?? "chronicle")
    }

    /// The configuration for the key options given.
    func configuration() throws -> Store.Configuration {
        var configuration = Store.Configuration()
        if let passphraseFile {
            guard let text = FileManager.default.contents(atPath: passphraseFile).map({ String(decoding: $0, as: UTF8.self) }) else {
                throw ValidationError("cannot read the passphrase file \(passphraseFile)")
            }
            configuration.keySource = .passphrase(text.trimmingCharacters(in: .newlines))
        } else if let keyFile {
            configuration.keySource = .keyFile(URL(fileURLWithPath: keyFile))
        } else if let passphrase = ProcessInfo.processInfo.environment["CHRONICLE_PASSPHRASE"], !passphrase.isEmpty {
            configuration.keySource = .passphrase(passphrase)
        }
        return configuration
    }

    func open() throws -> Store {
        try Store(directory: directory, configuration: configuration())
    }
}

/// Prints to standard error.
func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// A progress line on standard error, shown only when it is a terminal.
struct ProgressLine: Sendable {
    let label: String
    let enabled = isatty(2) == 1

    func update(_ done: UInt64, of total: UInt64) {
        guard enabled, total > 0 else { return }
        let width = 30
        let filled = Int(Double(width) * Double(min(done, total)) / Double(total))
        let bar = String(repeating: "█", count: filled) + String(repeating: "·", count: width - filled)
        FileHandle.standardError.write(Data("\r\(label) \(bar) \(done)/\(total)".utf8))
    }

    /// A running count, for work whose total is unknown.
    func count(_ done: Int) {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\(label) \(done) events".utf8))
    }

    func finish() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8))
    }
}

/// Parses `2026-11-22`, `2026-11-22T10:00:00Z` or a full ISO 8601 date.
func parseDate(_ text: String) -> Date? {
    let full = ISO8601DateFormatter()
    if let date = full.date(from: text) { return date }
    full.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    if let date = full.date(from: text) { return date }
    let day = ISO8601DateFormatter()
    day.formatOptions = [.withFullDate]
    return day.date(from: text)
}

/// JSON string literal for `text`.
func jsonString(_ text: String) -> String {
    let data = (try? JSONEncoder().encode(text)) ?? Data("\"\"".utf8)
    return String(decoding: data, as: UTF8.self)
}

func iso(_ date: Date) -> String { ISO8601DateFormatter().string(from: date) }
