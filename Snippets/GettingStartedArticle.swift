// The snippets of Documentation.docc/GettingStarted.md: compiled by every build; a test checks the article shows these lines.
// snippet.hide
import Chronicle
import Foundation

let applicationSupport = FileManager.default.temporaryDirectory.appendingPathComponent("getting-started-\(UUID().uuidString)")
// snippet.show
enum Theme: String, Codable, Sendable { case system, light, dark }

extension Keys {
    static let theme    = Key<Theme>("settings.theme", default: .system)
    static let launches = Key<Int>("stats.launches", default: 0, sync: .never)
    static let draft    = Key<String?>("editor.draft", sync: .manual)
}
// snippet.hide
// snippet.show
let store = try Store(directory: applicationSupport.appendingPathComponent("settings"))
// snippet.hide
// snippet.show
try Store.bootstrap(appID: "com.example.notes")
Store.standard[.theme] = .dark
// snippet.hide
// snippet.show
store[.theme] = .dark                 // non-throwing: errors go to the configured Logger
try store.set(.light, for: .theme)    // throwing form
let theme = store[.theme]             // the default when absent; reading writes nothing
try store.remove(.theme)              // appends a tombstone
try store.write { batch in            // one transaction, one fsync: all or nothing
    batch[.launches] = 3
    batch[.draft] = nil
}
for revision in try store.history(of: .theme) {
    print(revision.value as Any, revision.date, revision.origin)
}
// snippet.hide
let legacyPlist = applicationSupport.appendingPathComponent("com.example.notes.plist")
// snippet.show
try store.migrate("2026-11-import") { store in          // runs once per store, recorded in the log
    try store.importValues(from: .standard, keys: [Keys.theme, Keys.launches])  // fills keys never held
    try store.renameKey(from: "settings.colour", to: "settings.color")         // set + remove, one transaction
}
try store.importPropertyList(at: legacyPlist)          // a UserDefaults domain, `defaults export`
try store.update(.launches) { $0 += 1 }                 // atomic read-modify-write, across processes
try store.reset(.theme, .launches)                     // several keys, one transaction
try await store.flush()                                // every change so far is durable
