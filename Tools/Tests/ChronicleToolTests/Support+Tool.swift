@testable import Chronicle
@testable import ChronicleFormat
import ChronicleTesting
import Foundation
import Testing
import ToolsTestSupport

/// Replaces run-specific parts (dates, replica ids) of tool output with placeholders.
func normalized(_ text: String) -> String {
    var result = text
    let patterns = [
        (#"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z"#, "<date>"),
        (#"\b[0-9a-f]{32}\b"#, "<id>"),
        (#"\b[0-9a-f]{8}\b"#, "<short>"),
    ]
    for (pattern, replacement) in patterns {
        result = result.replacingOccurrences(of: pattern, with: replacement, options: .regularExpression)
    }
    return result
}

enum Theme: String, Codable, Sendable { case system, light, dark }

extension Keys {
    static let theme = Key<Theme>("settings.theme", default: .system, sync: .automaticSmall)
    static let launches = Key<Int>("stats.launches", default: 0, sync: .never)
    static let draft = Key<String?>("editor.draft", sync: .manual)
    static let apiToken = SecretKey<String?>("auth.token")
}

/// A configuration with a passphrase and the cheapest key derivation (tests only).
func passphraseConfiguration(_ passphrase: String) -> Store.Configuration {
    var configuration = Store.Configuration(keySource: .passphrase(passphrase), keyDerivationCost: .minimumForTesting)
    configuration.travelKeyCost = .minimumForTesting
    return configuration
}
