@testable import Chronicle
@testable import ChronicleLog
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

/// `event` (authenticated by `member`'s active key) re-dressed as an item of format 3: version
/// byte 3, its authenticator recomputed, at the end where every format keeps it.
func futureFormatItem(from event: Event, authenticatedBy member: Store) throws -> OpaqueEvent {
    var bytes = event.encoded()
    bytes[0] = 3
    return OpaqueEvent(origin: event.origin, counter: event.counter, bytes: try retagged(bytes, by: member), reason: "")
}

/// `bytes` (an item with an authenticator at its end, under a key `member` holds) with its tag
/// recomputed over what precedes it: what a member of a newer build would send.
func retagged(_ bytes: [UInt8], by member: Store) throws -> [UInt8] {
    let keyring = try member.crypto.get()
    let (id, tagStart) = try #require(Event.trailingAuthenticator(bytes))
    let key = try keyring.authenticationKey(id, dataKey: try keyring.dataKey(id))
    let tag = bytes.withUnsafeBytes { AuthenticationTag(hashing: UnsafeRawBufferPointer(rebasing: $0[..<tagStart]), key: key) }
    var result = bytes
    result.replaceSubrange(tagStart..., with: tag.bytes)
    return result
}

