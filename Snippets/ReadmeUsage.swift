// The Usage snippet of README.md: compiled by every build; a test checks that README.md shows these lines.
// snippet.hide
import Chronicle
import ChronicleHTTP
import Foundation

let url = FileManager.default.temporaryDirectory.appendingPathComponent("readme-\(UUID().uuidString)")
let passphrase = "correct horse battery staple"
func apply<T>(_ value: T) {}
let other = try Store(directory: url.appendingPathComponent("other"))
let sharedFolder = url.appendingPathComponent("shared")
let t = "token"
func render<A, B>(_ a: A, _ b: B) {}
func project(_ change: LogEntry) {}
var checkpoint: UInt64 = 0
let plistURL = url.appendingPathComponent("prefs.plist")
// snippet.show
import Chronicle

enum Theme: String, Codable, Sendable { case system, light, dark }

extension Keys {
    static let theme    = Key<Theme>("settings.theme", default: .system)
    static let launches = Key<Int>("stats.launches", default: 0, sync: .never)
    static let apiToken = SecretKey<String?>("auth.token")          // sealed; never synced unless asked
}

let store = try Store(directory: url, configuration: .init(keySource: .passphrase(passphrase)))
store[.theme] = .dark                                               // returns at once (durable ms later); errors go to the Logger
try store.write { batch in batch[.launches] = 3; batch[.apiToken] = "s3cr3t" }
for revision in try store.history(of: .theme) { print(revision) }   // value, time, origin
for await theme in store.updates(of: .theme) { apply(theme) }       // every change, from anywhere
for await (theme, launches) in store.updates(of: .theme, .launches) { render(theme, launches) }
for await change in store.changes(after: checkpoint) where change.isCurrent { project(change); checkpoint = change.sequence }  // the log, lossless

try store.importValues(from: .standard, names: ["theme", "launches"])   // one event each; a second run adds nothing
try store.importPropertyList(at: plistURL)                          // a UserDefaults domain or `defaults export` file
try store.renameKey(from: "settings.colour", to: "settings.color")  // set new + remove old, one transaction, syncs

final class Settings {
    @Default(.theme) var theme                                      // Store.standard
    @Secret(.apiToken) var token
}

let replicator = Replicator(store: store, peers: [.store(other), .directory(sharedFolder), .http(url, token: t)])
try await replicator.sync()
