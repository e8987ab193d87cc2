@testable import Chronicle
import ChronicleTesting
import Foundation
import ChronicleLMDB
import InMemoryLogging
import Logging
import Synchronization
import Testing

extension Keys {
    static let apiToken = SecretKey<String?>("auth.token")
    static let pin = SecretKey<Int>("auth.pin", default: 0)
}

/// A passphrase store configuration with the cheapest Argon2id cost, for keys at rest and
/// keys that travel (never below MODERATE outside tests), so tests stay fast.
func passphraseConfiguration(_ passphrase: String, encryptDefaults: Bool = false) -> Store.Configuration {
    var configuration = Store.Configuration(
        keySource: .passphrase(passphrase), encryptDefaults: encryptDefaults, keyDerivationCost: .minimumForTesting)
    configuration.travelKeyCost = .minimumForTesting
    return configuration
}
