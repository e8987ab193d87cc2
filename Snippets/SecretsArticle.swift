// The snippet of Documentation.docc/Secrets.md: compiled by every build; a test checks the article shows these lines.
// snippet.hide
import Chronicle
import Foundation

let url = FileManager.default.temporaryDirectory.appendingPathComponent("secrets-\(UUID().uuidString)")
let passphrase = "correct horse battery staple"
// snippet.show
extension Keys {
    static let apiToken = SecretKey<String?>("auth.token")      // sync: .never unless you ask
}

let store = try Store(directory: url, configuration: .init(keySource: .passphrase(passphrase)))
try store.set("s3cr3t", for: .apiToken)
let token = try store.value(for: .apiToken)
