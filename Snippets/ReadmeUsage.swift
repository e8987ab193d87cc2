// The Usage snippet of README.md: compiled by every build; a test checks that README.md shows these lines.
// snippet.hide
import Chronicle
import Foundation
#if canImport(Observation)
import Observation
#endif

let url = FileManager.default.temporaryDirectory.appendingPathComponent("readme-\(UUID().uuidString)")
let passphrase = "correct horse battery staple"
func apply<T>(_ value: T) {}
let other = try Store(directory: url.appendingPathComponent("other"))
let sharedFolder = url.appendingPathComponent("shared")
func render<A, B>(_ a: A, _ b: B) {}
func project(_ change: LogEntry) {}
var saved = LogCheckpoint.start
var projection: [String: String] = [:]
func alert(_ failure: WriteFailure) {}
let plistURL = url.appendingPathComponent("prefs.plist")
// snippet.show
import Chronicle

enum Theme: String, Codable, Sendable { case system, light, dark }

extension Keys {
    static let theme    = Key<Theme>("settings.theme", default: .system, sync: .automaticSmall)  // syncs: opt-in per key
    static let launches = Key<Int>("stats.launches", default: 0)    // no policy: stays on this device
    static let position = Key<Int>("reader.position", default: 0, retention: .latest)  // history: one revision
    static let apiToken = SecretKey<String?>("auth.token")          // sealed; never synced unless asked
}

let store = try Store(directory: url, configuration: .init(keySource: .passphrase(passphrase)))
store[.theme] = .dark                                               // any thread; returns at once (durable ms later)
try store.set(.dark, for: .theme)                                   // blocks until durable; compiles in async code too
try await store.flush()                                             // suspends until every change so far is durable;
                                                                    // throws what a non-throwing write could not save
let launches = try store.update(.launches) { $0 += 1 }              // atomic across threads and processes
try store.write { batch in batch[.launches] += 1; batch[.apiToken] = "s3cr3t" }  // a batch reads its own changes
for await failure in store.writeFailures { alert(failure) }         // a non-throwing write that could not be saved
for revision in try store.history(of: .theme) { print(revision) }   // value, time, origin
for await theme in store.updates(of: .theme) { apply(theme) }       // every change, from anywhere
for await (theme, launches) in store.updates(of: .theme, .launches) { render(theme, launches) }
for await change in store.changes(from: saved) {                    // the log, lossless and resumable
    if change.epoch != saved.epoch { projection.removeAll() }      // restored or copied: it starts over
    if change.isCurrent { project(change) }
    saved = change.checkpoint
}

try store.migrate("2026-11-from-user-defaults") { store in         // runs once per store, recorded in the log
    try store.importValues(from: .standard, keys: [Keys.theme, Keys.launches])  // fills only keys never held
    try store.renameKey(from: "settings.colour", to: "settings.color")
}

@MainActor final class Settings {                                   // Sendable by isolation
    @Default(.theme) var theme                                      // Store.standard
    @Secret(.apiToken) var token
}
@Observable @MainActor final class Model { let theme = ObservedValue(.theme) }  // observed; a wrapper there needs @ObservationIgnored

let replicator = Replicator(store: store, peers: [.store(other), .directory(sharedFolder)])  // .http(url, token:): HTTPClient trait
try await replicator.sync()
// snippet.hide
// snippet.show
// At launch, before the first read: each step runs once per store, in order, and is recorded
// in the log (`chronicle log` shows chronicle.migrations.<id>).
try Store.bootstrap(appID: "com.example.app")
try Store.standard.migrate("2026-11-import-user-defaults") { store in
    // Fills only keys the store has never held, with each key's own sync policy; stamped
    // before every change, so it never wins over what the user set on any device.
    try store.importValues(from: .standard, keys: [Keys.theme, Keys.launches])
}
try Store.standard.migrate("2026-12-rename-colour") { store in
    try store.renameKey(from: "settings.colour", to: "settings.color")   // keeps the value's time
}
