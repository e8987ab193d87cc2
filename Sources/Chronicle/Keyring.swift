import Foundation
import LMDB
import Sodium
import Synchronization

/// The data keys of a store, unwrapped with the key-encryption key (KEK) that
/// the store's ``KeySource`` gives.
///
/// Wrapped keys live in `meta` (`dk/<id>`, with `dk.active` naming the key new
/// events are sealed with). Unwrapped keys live in `sodium_malloc`ed memory
/// and are zeroed when the keyring goes away.
final class Keyring: Sendable {
    /// Where key-encryption keys come from.
    enum Source: Sendable {
        /// A passphrase (kept in secure memory), and the Argon2id limits for keys wrapped from now on.
        case passphrase(SecureBytes, limits: PasswordHash.Limits)
        /// Key material from a key file or a provider.
        case material(SecureBytes, kind: KeyEncryptionKind)
        /// The default key file, loaded (and created) on first use.
        case defaultKeyFile(URL)

        /// The source for a configured ``KeySource``; key material is copied into secure memory and wiped.
        init(_ keySource: KeySource, cost: KeyDerivationCost) throws {
            switch keySource {
            case let .passphrase(passphrase):
                guard !passphrase.isEmpty else { throw ChronicleError.invalidArgument("the passphrase is empty") }
                var bytes = Array(passphrase.utf8)
                defer { Sodium.wipe(&bytes) }
                self = .passphrase(try SecureBytes(bytes), limits: cost.limits)
            case let .keyFile(url):
                self = .material(try Keyring.readKeyFile(url), kind: .keyFile)
            case let .provider(provider):
                var bytes = try provider.keyEncryptionKey()
                defer { Sodium.wipe(&bytes) }
                guard bytes.count >= 32 else { throw ChronicleError.invalidArgument("a key provider must return at least 32 bytes") }
                self = .material(try Keyring.derivedKEK(from: bytes, kind: .provider), kind: .provider)
            }
        }
    }

    private struct State: ~Copyable {
        var source: Source
        /// KEKs by `salt ‖ limits` (passphrase) or by kind (material).
        var keks: [[UInt8]: SecureBytes] = [:]
        var dataKeys: [KeyID: SecureBytes] = [:]
        /// Key records this key source cannot open (a mistyped passphrase on a new device).
        var unopenable: Set<KeyID> = []
    }

    private let state: Mutex<State>
    let engine: Engine

    private init(engine: Engine, source: Source) {
        self.engine = engine
        self.state = Mutex(State(source: source))
    }

    /// The default key file: `$XDG_CONFIG_HOME/chronicle/default.key`, else `~/.config/chronicle/default.key`.
    static func defaultKeyFileURL() -> URL {
        let environment = ProcessInfo.processInfo.environment
        let base: URL
        if let config = environment["XDG_CONFIG_HOME"], !config.isEmpty {
            base = URL(fileURLWithPath: config, isDirectory: true)
        } else {
            base = FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".config", isDirectory: true)
        }
        return base.appendingPathComponent("chronicle/default.key")
    }

    // MARK: - Opening

    /// Opens the keyring of `engine` with the configured key source.
    ///
    /// With an explicit key source, a store without a data key gets one now,
    /// and an existing one must unwrap (else `.wrongKey`, before anything is
    /// written). Without one, the default key file is used and created lazily.
    static func open(engine: Engine, configuration: Store.Configuration) -> Result<Keyring, ChronicleError> {
        do {
            let source = try configuration.keySource.map { try Source($0, cost: configuration.keyDerivationCost) }
                ?? .defaultKeyFile(defaultKeyFileURL())
            let keyring = Keyring(engine: engine, source: source)
            try keyring.prepare(create: configuration.keySource != nil)
            return .success(keyring)
        } catch {
            return .failure(ChronicleError.wrap(error))
        }
    }

    /// Checks that the active key unwraps (or creates the first key) and installs the chain key.
    private func prepare(create: Bool) throws {
        let (active, chainKeyID) = try engine.environment.read { txn in
            (try txn.get(engine.dbs.meta, key: MetaKey.activeKey).map { KeyID(bytes: $0) },
             try txn.get(engine.dbs.meta, key: MetaKey.chainKey).map { KeyID(bytes: $0) })
        }
        if let active {
            _ = try dataKey(active)
        } else if create {
            try engine.environment.write { txn in
                var head = try LogHead.read(txn, engine.dbs)
                _ = try activeKey(txn, &head)
                try head.write(txn, engine.dbs)
            }
        }
        if let chainKeyID, let key = try? dataKey(chainKeyID) {
            engine.installChainKey(id: chainKeyID, from: key)
        }
    }

    // MARK: - Keys

    /// The key that seals new events, created (and, on an empty log, made the chain key) when absent.
    func activeKey(_ txn: borrowing Transaction, _ head: inout LogHead) throws -> (KeyID, SecureBytes) {
        let dbs = engine.dbs
        try requireEveryKeyOpens(txn)
        if let bytes = try txn.get(dbs.meta, key: MetaKey.activeKey) {
            let id = KeyID(bytes: bytes)
            return (id, try dataKey(id, txn))
        }
        let (id, key) = try createKey(txn)
        try txn.put(dbs.meta, key: MetaKey.activeKey, value: id.bytes)
        if head.sequence == 0 && head.chainKeyID == nil {
            try txn.put(dbs.meta, key: MetaKey.chainKey, value: id.bytes)
            head.chainKeyID = id
            engine.installChainKey(id: id, from: key)
        }
        return (id, key)
    }

    /// Refuses to seal while the store holds key records this key source cannot
    /// open: a replica with a mistyped passphrase must not start a key (and a
    /// history of secrets) of its own beside the group's.
    private func requireEveryKeyOpens(_ txn: borrowing Transaction) throws {
        var ids: [KeyID] = []
        try txn.scan(engine.dbs.meta, from: MetaKey.wrappedKeyPrefix) { key, _ in
            guard key.starts(with: MetaKey.wrappedKeyPrefix) else { return false }
            ids.append(KeyID(bytes: Array(key.dropFirst(MetaKey.wrappedKeyPrefix.count))))
            return true
        }
        let (known, bad) = state.withLock { state in (Set(state.dataKeys.keys), state.unopenable) }
        for id in ids where !known.contains(id) {
            if bad.contains(id) { throw ChronicleError.wrongKey }
            do {
                _ = try dataKey(id, txn)
            } catch ChronicleError.wrongKey {
                state.withLock { _ = $0.unopenable.insert(id) }
                throw ChronicleError.wrongKey
            }
        }
    }

    /// Creates and stores a new wrapped data key (not yet active).
    func createKey(_ txn: borrowing Transaction) throws -> (KeyID, SecureBytes) {
        let id = KeyID.random()
        let key = try SecureBytes(randomCount: AEAD.keyBytes)
        let wrapped = try wrapForStorage(key, id: id, txn)
        try txn.put(engine.dbs.meta, key: MetaKey.wrappedKey(id), value: wrapped.encoded())
        state.withLock { $0.dataKeys[id] = key }
        return (id, key)
    }

    /// Wraps a data key with this replica's KEK (reusing the active key's salt, so no new Argon2 run).
    private func wrapForStorage(_ key: SecureBytes, id: KeyID, _ txn: borrowing Transaction) throws -> WrappedKey {
        var reuse: (salt: [UInt8], limits: PasswordHash.Limits)?
        if let activeBytes = try txn.get(engine.dbs.meta, key: MetaKey.activeKey),
            let recordBytes = try txn.get(engine.dbs.meta, key: MetaKey.wrappedKey(KeyID(bytes: activeBytes))),
            let record = try? WrappedKey(decoding: recordBytes), record.kind == .passphrase
        {
            reuse = (record.salt, record.limits)
        }
        let wrapping = try wrappingKey(for: sourceValue, reusing: reuse)
        return try WrappedKey.wrap(
            key, id: id, kind: wrapping.kind, salt: wrapping.salt, limits: wrapping.limits,
            created: UInt64(Date().timeIntervalSince1970 * 1000), kek: wrapping.kek)
    }

    /// The key-encryption key `source` wraps data keys with, and the parameters stored beside them.
    /// A passphrase reuses `reusing` (salt and cost) when given, so no new Argon2id run is needed.
    private func wrappingKey(
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
        }
    }

    /// The data key with `id`, unwrapping it from `meta` on first use.
    func dataKey(_ id: KeyID) throws -> SecureBytes {
        if let key = state.withLock({ $0.dataKeys[id] }) { return key }
        return try engine.environment.read { txn in try dataKey(id, txn) }
    }

    func dataKey(_ id: KeyID, _ txn: borrowing Transaction) throws -> SecureBytes {
        if let key = state.withLock({ $0.dataKeys[id] }) { return key }
        guard let bytes = try txn.get(engine.dbs.meta, key: MetaKey.wrappedKey(id)) else {
            throw ChronicleError.keyUnavailable(reason: "data key \(id) is not on this replica (import the group's keys)")
        }
        let record: WrappedKey
        do { record = try WrappedKey(decoding: bytes) } catch {
            throw ChronicleError.corruptRecord(sequence: 0, reason: "wrapped data key \(id): \(error.description)")
        }
        let key = try unwrap(record)
        state.withLock { $0.dataKeys[id] = key }
        return key
    }

    private func unwrap(_ record: WrappedKey) throws -> SecureBytes {
        let kek = try kek(for: record)
        do { return try record.unwrap(with: kek) } catch { throw ChronicleError.wrongKey }
    }

    // MARK: - KEKs

    private var sourceValue: Source { state.withLock { $0.source } }

    private let zeroSalt = [UInt8](repeating: 0, count: PasswordHash.saltBytes)

    private func kek(for record: WrappedKey) throws -> SecureBytes {
        switch (sourceValue, record.kind) {
        case let (.passphrase(passphrase, _), .passphrase):
            return try passphraseKEK(passphrase, salt: record.salt, limits: record.limits)
        case let (.material(kek, kind), recordKind) where kind == recordKind:
            return kek
        case let (.defaultKeyFile(url), .keyFile):
            guard FileManager.default.fileExists(atPath: url.path) else {
                throw ChronicleError.keyUnavailable(reason: "the key file \(url.path) is missing; restore it or open the store with its key source")
            }
            return try Self.readKeyFile(url)
        default:
            throw ChronicleError.wrongKey
        }
    }

    /// Argon2id of `passphrase` with a record's salt and cost, cached per salt and cost
    /// (salts are random, so two passphrases never share an entry; a change clears the cache).
    private func passphraseKEK(_ passphrase: SecureBytes, salt: [UInt8], limits: PasswordHash.Limits) throws -> SecureBytes {
        let cacheKey = salt + limits.opsLimit.bigEndianBytes + limits.memLimit.bigEndianBytes
        if let kek = state.withLock({ $0.keks[cacheKey] }) { return kek }
        var bytes = passphrase.copyBytes()
        defer { Sodium.wipe(&bytes) }
        let kek = try PasswordHash.deriveKey(length: AEAD.keyBytes, password: bytes, salt: salt, limits: limits)
        state.withLock { $0.keks[cacheKey] = kek }
        return kek
    }

    /// A KEK from key material of any length ≥ 32 bytes (BLAKE2b with a domain label).
    static func derivedKEK(from material: [UInt8], kind: KeyEncryptionKind) throws -> SecureBytes {
        var digest = GenericHash.hash([Array("chronicle.kek.v1".utf8), [kind.rawValue], material], length: 32)
        defer { Sodium.wipe(&digest) }
        return try SecureBytes(digest)
    }

    /// Reads a key file (at least 32 bytes), creating a random 0600 one when asked and missing.
    static func readKeyFile(_ url: URL, createIfMissing: Bool = false) throws -> SecureBytes {
        let manager = FileManager.default
        if createIfMissing, !manager.fileExists(atPath: url.path) {
            try createKeyFile(url)
        }
        guard var bytes = manager.contents(atPath: url.path).map(Array.init) else {
            throw ChronicleError.keyUnavailable(reason: "cannot read the key file \(url.path)")
        }
        defer { Sodium.wipe(&bytes) }
        guard bytes.count >= 32 else {
            throw ChronicleError.invalidArgument("the key file \(url.path) holds \(bytes.count) bytes; it needs at least 32 random bytes")
        }
        return try derivedKEK(from: bytes, kind: .keyFile)
    }

    /// Creates a key file of 32 random bytes with mode 0600 in a 0700 directory, atomically.
    static func createKeyFile(_ url: URL) throws {
        let manager = FileManager.default
        let directory = url.deletingLastPathComponent()
        do {
            try manager.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            var random = Sodium.randomBytes(32)
            defer { Sodium.wipe(&random) }
            let temporary = directory.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString)")
            guard manager.createFile(atPath: temporary.path, contents: Data(random), attributes: [.posixPermissions: 0o600]) else {
                throw ChronicleError.io(path: temporary.path, reason: "cannot create the key file")
            }
            // A hard link publishes the complete file atomically and never replaces one another process made first.
            do { try manager.linkItem(atPath: temporary.path, toPath: url.path) } catch {
                guard manager.fileExists(atPath: url.path) else {
                    try? manager.removeItem(at: temporary)
                    throw ChronicleError.io(path: url.path, reason: "cannot create the key file: \(error.localizedDescription)")
                }
            }
            try? manager.removeItem(at: temporary)
        } catch let error as ChronicleError {
            throw error
        } catch {
            throw ChronicleError.io(path: url.path, reason: error.localizedDescription)
        }
    }

    // MARK: - Sealing

    /// Seals an event's payload in place (inside the write transaction that appends it).
    func seal(_ event: inout Event, _ txn: borrowing Transaction, _ head: inout LogHead) throws {
        let (id, key) = try activeKey(txn, &head)
        let nonce = Sodium.randomBytes(AEAD.nonceBytes)
        let header = Envelope(keyID: id, nonce: nonce, ciphertext: []).header
        event.sealed = true
        let associatedData = Envelope.associatedData(for: event, header: header)
        let ciphertext = try AEAD.seal(event.payload, associatedData: associatedData, nonce: nonce, key: key)
        Sodium.wipe(&event.payload)
        event.payload = Envelope(keyID: id, nonce: nonce, ciphertext: ciphertext).encoded()
    }

    /// Opens a sealed view entry of `key` in `domain`.
    func open(_ entry: ViewEntry, domain: Domain, key: String) throws -> [UInt8] {
        let envelope: Envelope
        do { envelope = try Envelope(decoding: entry.payload) } catch {
            throw ChronicleError.tampered(sequence: entry.sequence, key: key)
        }
        let dataKey = try dataKey(envelope.keyID)
        let associatedData = Envelope.associatedData(
            origin: entry.origin, counter: entry.counter, hlc: entry.hlc, domain: domain, key: key, op: entry.op,
            policy: entry.policy, encoding: entry.encoding, header: envelope.header)
        do {
            return try AEAD.open(envelope.ciphertext, associatedData: associatedData, nonce: envelope.nonce, key: dataKey)
        } catch {
            throw ChronicleError.tampered(sequence: entry.sequence, key: key)
        }
    }

    // MARK: - Changing keys

    /// Re-wraps every data key under a new key source; the data keys (and so every sealed event) stay.
    func changeSource(to newSource: Source) throws {
        try engine.environment.write { txn in
            let dbs = engine.dbs
            var records: [WrappedKey] = []
            try txn.scan(dbs.meta, from: MetaKey.wrappedKeyPrefix) { key, value in
                guard key.starts(with: MetaKey.wrappedKeyPrefix) else { return false }
                records.append(try WrappedKey(decoding: value))
                return true
            }
            let keys = try records.map { ($0, try unwrap($0)) }
            let now = UInt64(Date().timeIntervalSince1970 * 1000)
            let wrapping = try wrappingKey(for: newSource, reusing: nil)  // one fresh salt, one Argon2id run
            for (record, key) in keys {
                let wrapped = try WrappedKey.wrap(
                    key, id: record.id, kind: wrapping.kind, salt: wrapping.salt, limits: wrapping.limits, created: now, kek: wrapping.kek)
                try txn.put(dbs.meta, key: MetaKey.wrappedKey(record.id), value: wrapped.encoded())
            }
        }
        state.withLock { state in
            state.source = newSource
            state.keks.removeAll()  // KEKs of the old passphrase
        }
    }

    /// Makes a new data key active; older keys keep opening older events.
    func rotate() throws -> KeyID {
        try engine.environment.write { txn in
            let (id, _) = try createKey(txn)
            try txn.put(engine.dbs.meta, key: MetaKey.activeKey, value: id.bytes)
            return id
        }
    }

    /// Every wrapped data key (never a plaintext key).
    func wrappedKeys() throws -> [WrappedKey] {
        try engine.environment.read { txn in
            var records: [WrappedKey] = []
            try txn.scan(engine.dbs.meta, from: MetaKey.wrappedKeyPrefix) { key, value in
                guard key.starts(with: MetaKey.wrappedKeyPrefix) else { return false }
                records.append(try WrappedKey(decoding: value))
                return true
            }
            return records
        }
    }

    /// Stores wrapped keys received from another replica, after checking that each unwraps here.
    func importWrapped(_ records: [WrappedKey]) throws -> Int {
        let existing = Set(try wrappedKeys().map(\.id))
        let fresh = records.filter { !existing.contains($0.id) }
        let unwrapped = try fresh.map { ($0, try unwrap($0)) }  // all or nothing: .wrongKey before any write
        try engine.environment.write { txn in
            for (record, _) in unwrapped {
                try txn.put(engine.dbs.meta, key: MetaKey.wrappedKey(record.id), value: record.encoded())
            }
        }
        state.withLock { state in
            for (record, key) in unwrapped { state.dataKeys[record.id] = key }
        }
        return unwrapped.count
    }
}

extension Keyring {
    /// The wrapped keys as they travel: passphrase-wrapped keys re-wrapped with
    /// a fresh salt and at least the moderate Argon2id cost.
    func exportForTravel() throws -> [WrappedKey] {
        let records = try wrappedKeys()
        guard case let .passphrase(passphrase, limits) = state.withLock({ $0.source }) else { return records }
        let moderate = PasswordHash.Limits.moderate
        let travel = PasswordHash.Limits(opsLimit: max(limits.opsLimit, moderate.opsLimit), memLimit: max(limits.memLimit, moderate.memLimit))
        let wrapping = try wrappingKey(for: .passphrase(passphrase, limits: travel), reusing: nil)
        return try records.map { record in
            try WrappedKey.wrap(
                try dataKey(record.id), id: record.id, kind: wrapping.kind, salt: wrapping.salt, limits: wrapping.limits,
                created: record.created, kek: wrapping.kek)
        }
    }
}
