// The snippet of Documentation.docc/Chronicle.md: compiled by every build; a test checks the article shows these lines.
// snippet.hide
import Foundation

enum Theme: String, Codable, Sendable { case system, light, dark }
let url = FileManager.default.temporaryDirectory.appendingPathComponent("overview-\(UUID().uuidString)")
// snippet.show
import Chronicle

extension Keys {
    static let theme    = Key<Theme>("settings.theme", default: .system)
    static let launches = Key<Int>("stats.launches", default: 0, sync: .never)
}

let store = try Store(directory: url)
store[.theme] = .dark
let history = try store.history(of: .theme)
