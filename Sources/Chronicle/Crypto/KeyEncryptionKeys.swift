import ChronicleFormat
import ChronicleLog
import ChronicleSodium
import Foundation
import Synchronization

/// A keyring's key-encryption keys (KEKs): where they come from (the store's ``KeySource``), the
/// KEKs derived from a passphrase (cached per salt and cost), the Argon2id runs made, and what
/// deriving KEKs for records peers sent may cost. The data keys they unwrap are the
/// ``Keyring``'s; nothing here reads the log.
final class KeyEncryptionKeys: Sendable {
    /// Where key-encryption keys come from.
    enum Source: Sendable {
        /// A passphrase (kept in secure memory), and the Argon2id limits for keys wrapped from now on.
        case passphrase(SecureBytes, limits: PasswordHash.Limits)
        /// Key material from a key file or a provider.
        case material(SecureBytes, kind: KeyEncryptionKind)
        /// The default key file, loaded (and created) on first use.
        case defaultKeyFile(URL)
        #if canImport(Security)
        /// The default key material in the platform's keychain, loaded (and created) on first use.
        case defaultKeychain(KeychainKeyProvider)
        #endif

        /// The source for a configured ``KeySource``; key material is copied into secure memory and wiped.
        init(_ keySource: KeySource, cost: KeyDerivationCost) throws {
            switch keySource {
            case let .passphrase(passphrase):
                guard !passphrase.isEmpty else { throw ChronicleError.invalidArgument("the passphrase is empty") }
                guard passphrase != KeySource.redactedPassphrase else {
                    throw ChronicleError.invalidArgument("this configuration comes from an open store, which keeps no passphrase; give the passphrase again")
                }
                var bytes = Array(passphrase.utf8)
                defer { Sodium.wipe(&bytes) }
                self = .passphrase(try SecureBytes(bytes), limits: cost.limits)
            case let .keyFile(url):
                self = .material(try KeyEncryptionKeys.readKeyFile(url), kind: .keyFile)
            case let .provider(provider):
                var bytes = try provider.keyEncryptionKey()
                defer { Sodium.wipe(&bytes) }
                guard bytes.count >= 32 else { throw ChronicleError.invalidArgument("a key provider must return at least 32 bytes") }
                self = .material(try KeyEncryptionKeys.derivedKEK(from: bytes, kind: .provider), kind: .provider)
            }
        }
    }

    private struct State: ~Copyable {
        var source: Source
        /// KEKs by `salt ‖ limits` (passphrase) or by kind (material).
        var keks: [[UInt8]: SecureBytes] = [:]
        /// Argon2id runs made (for statistics and tests).
        var derivations = 0
    }

    private let state: Mutex<State>
    /// What deriving keys for records peers sent may cost, and the KEKs it derived.
    let received: ReceivedDerivations

    init(source: Source, receivedDerivationsPerMinute: Int) {
        state = Mutex(State(source: source))
        received = ReceivedDerivations(perMinute: receivedDerivationsPerMinute)
    }

    /// Where the KEKs come from now.
    var source: Source { state.withLock { $0.source } }
    /// Argon2id runs made so far (for statistics and tests).
    var derivations: Int { state.withLock { $0.derivations } }
    /// KEKs kept as this store's own.
    var cachedCount: Int { state.withLock { $0.keks.count } }

    /// From now on, KEKs come from `newSource` (the old passphrase's KEKs are forgotten).
    func replaceSource(with newSource: Source) {
        state.withLock { state in
            state.source = newSource
            state.keks.removeAll()
        }
    }

    /// Unwraps a data key. A passphrase record's Argon2id cost must lie within libsodium's
    /// minimum and ``KeyDerivationCost/sensitive``, whatever the record says, so no record can
    /// make this device run a derivation it cannot afford.
    /// - Parameter cacheKEK: keep a passphrase KEK for later (not for records received from peers,
    ///   whose salts are theirs: the cache holds only this store's own KEKs).
    func unwrap(_ record: WrappedKey, cacheKEK: Bool = true) throws -> SecureBytes {
        if record.kind == .passphrase, let problem = Keyring.boundsProblem(record, minimum: .minimum) {
            throw ChronicleError.corruptKeyRecord(id: record.id.description, reason: problem)
        }
        let kek = try kek(for: record, cache: cacheKEK)
        do { return try record.unwrap(with: kek) } catch { throw ChronicleError.wrongKey }
    }

    /// The key-encryption key `source` wraps data keys with, and the parameters stored beside them.
    /// A passphrase reuses `reusing` (salt and cost) when given, so no new Argon2id run is needed.
    func wrappingKey(
        for source: Source, reusing: (salt: [UInt8], limits: PasswordHash.Limits)?
    ) throws -> (kind: KeyEncryptionKind, salt: [UInt8], limits: PasswordHash.Limits, kek: SecureBytes) {
        let noLimits = PasswordHash.Limits(opsLimit: 0, memLimit: 0)
        switch source {
        case let .passphrase(passphrase, configured):
            let salt = reusing?.salt ?? Sodium.randomBytes(PasswordHash.saltBytes)
            let limits = reusing?.limits ?? configured
            return (.passphrase, salt, limits, try passphraseKEK(passphrase, salt: salt, limits: limits))
        case let .material(kek, kind):
            return (kind, zeroSalt, noLimits, kek)
        case let .defaultKeyFile(url):
            return (.keyFile, zeroSalt, noLimits, try Self.readKeyFile(url, createIfMissing: true))
        #if canImport(Security)
        case let .defaultKeychain(keychain):
            return (.keyFile, zeroSalt, noLimits, try Self.keychainKEK(keychain))
        #endif
        }
    }

    var zeroSalt: [UInt8] { [UInt8](repeating: 0, count: PasswordHash.saltBytes) }

    func kek(for record: WrappedKey, cache: Bool = true) throws -> SecureBytes {
        switch (source, record.kind) {
        case let (.passphrase(passphrase, _), .passphrase):
            return try passphraseKEK(passphrase, salt: record.salt, limits: record.limits, cache: cache)
        case let (.material(kek, kind), recordKind) where kind == recordKind:
            return kek
        case let (.defaultKeyFile(url), .keyFile):
            guard FileManager.default.fileExists(atPath: url.path) else {
                throw ChronicleError.keyUnavailable(reason: "the key file \(url.path) is missing; restore it or open the store with its key source")
            }
            return try Self.readKeyFile(url)
        #if canImport(Security)
        case let (.defaultKeychain(keychain), .keyFile):
            return try Self.keychainKEK(keychain)
        #endif
        default:
            throw ChronicleError.wrongKey
        }
    }

    /// Argon2id of `passphrase` with a record's salt and cost, cached per salt and cost
    /// (salts are random, so two passphrases never share an entry; a change clears the cache).
    func passphraseKEK(_ passphrase: SecureBytes, salt: [UInt8], limits: PasswordHash.Limits, cache: Bool = true) throws -> SecureBytes {
        let cacheKey = Self.kekCacheKey(salt: salt, limits: limits)
        if let kek = state.withLock({ $0.keks[cacheKey] }) { return kek }
        var bytes = passphrase.copyBytes()
        defer { Sodium.wipe(&bytes) }
        let kek = try PasswordHash.deriveKey(length: AEAD.keyBytes, password: bytes, salt: salt, limits: limits)
        state.withLock { state in
            state.derivations += 1
            if cache { state.keks[cacheKey] = kek }
        }
        return kek
    }

    static func kekCacheKey(salt: [UInt8], limits: PasswordHash.Limits) -> [UInt8] {
        salt + limits.opsLimit.bigEndianBytes + limits.memLimit.bigEndianBytes
    }

    /// Whether unwrapping `record` needs an Argon2id run (a passphrase record whose KEK is not cached).
    func needsDerivation(_ record: WrappedKey) -> Bool {
        guard record.kind == .passphrase, case .passphrase = source else { return false }
        let cacheKey = Self.kekCacheKey(salt: record.salt, limits: record.limits)
        return state.withLock { $0.keks[cacheKey] == nil } && received.kek(cacheKey) == nil
    }

    /// Unwraps a record a peer sent. A passphrase KEK is derived at most once per (salt, cost)
    /// among the last ``ReceivedDerivations/kekCapacity``, whether or not it opens the record, in
    /// `source`'s turn (``DerivationTurns``).
    func unwrapReceived(_ record: WrappedKey, source sender: String) throws -> SecureBytes {
        guard record.kind == .passphrase, case let .passphrase(passphrase, _) = source else { return try unwrap(record, cacheKEK: false) }
        if let problem = Keyring.boundsProblem(record, minimum: .minimum) {
            throw ChronicleError.corruptKeyRecord(id: record.id.description, reason: problem)
        }
        let cacheKey = Self.kekCacheKey(salt: record.salt, limits: record.limits)
        let cached = state.withLock { $0.keks[cacheKey] } ?? received.kek(cacheKey)
        let kek = try cached ?? received.turns.run(source: sender) {
            // Another caller with the same salt and cost may have derived it while this one waited.
            try received.kek(cacheKey) ?? passphraseKEK(passphrase, salt: record.salt, limits: record.limits, cache: false)
        }
        if cached == nil { received.remember(kek, for: cacheKey) }
        do { return try record.unwrap(with: kek) } catch { throw ChronicleError.wrongKey }
    }
}
