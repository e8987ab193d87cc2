import ChronicleFormat
import ChronicleLog
public import Foundation
import ChronicleSodium

extension Store {
    // MARK: - Secrets

    // MARK: - Keys

    /// Re-wraps the store's data keys under a new passphrase. Instant for the
    /// data: no sealed event is touched. Other stores of the same process keep
    /// working with the data keys they already opened.
    public func changePassphrase(to passphrase: String) throws(ChronicleError) {
        try changeKeySource(to: .passphrase(passphrase))
    }

    /// Re-wraps the store's data keys under a new key source (passphrase, key file or provider).
    public func changeKeySource(to source: KeySource) throws(ChronicleError) {
        let keyring = try crypto.get()
        try mappingErrors { try keyring.changeSource(to: Keyring.Source(source, cost: configuration.keyDerivationCost)) }
    }

    /// Makes a new data key active for new sealed events; old keys keep opening old events.
    ///
    /// - Parameter reseal: also re-seal every live secret (and sealed plain
    ///   value) under the new key, as new events.
    public func rotateDataKey(reseal: Bool = false) throws(ChronicleError) {
        let keyring = try crypto.get()
        _ = try mappingErrors { try keyring.rotate() }
        guard reseal else { return }
        let eventLog = try settledEventLog
        let authenticator = configuration.keySource != nil ? keyring : nil
        /// A data key that is not unwrapped yet: unwrap it outside the transaction (never run
        /// Argon2id or a nested transaction inside one), then start over.
        struct KeyNeeded: Error { var id: KeyID }
        // Read and re-seal in one transaction, so a set committed meanwhile is never overwritten
        // by the value it replaced.
        while true {
            do {
                try eventLog.commitRewriting(Domain.allCases) { domain, name, entry in
                    guard entry.sealed && entry.op == .set else { return nil }
                    if let id = try? Envelope(decoding: entry.payload).keyID, !keyring.hasDataKey(id) { throw KeyNeeded(id: id) }
                    let plaintext = try keyring.open(entry, domain: domain, key: name)
                    var change = PendingChange(
                        domain: domain, key: name, policy: entry.policy, op: .set, encoding: entry.encoding, payload: plaintext, sealer: keyring)
                    change.authenticator = authenticator
                    return change
                }
                return
            } catch let needed as KeyNeeded {
                _ = try mappingErrors { try keyring.dataKey(needed.id) }
            } catch {
                throw ChronicleError.wrap(error)
            }
        }
    }

    /// The store's wrapped data keys, for another replica of the same sync group
    /// (``importDataKeys(_:)``): the cryptographic keys that seal values, not settings keys.
    /// Never contains a plaintext key.
    ///
    /// Passphrase-wrapped keys are re-wrapped for travel with at least the
    /// ``KeyDerivationCost/moderate`` Argon2id cost. Anyone holding the export
    /// can try passphrases offline: prefer a key file for valuable groups.
    public func exportDataKeys() throws(ChronicleError) -> Data {
        let keyring = try crypto.get()
        return try mappingErrors { Data(try KeyBundle.encode(try keyring.exportForTravel())) }
    }

    /// Adds wrapped data keys exported by another replica of the group.
    ///
    /// Every key must open with this store's key source (the same passphrase or
    /// key file), else nothing is imported and the call throws ``ChronicleError/wrongKey``.
    /// - Returns: the number of keys that were new here.
    @discardableResult
    public func importDataKeys(_ data: Data) throws(ChronicleError) -> Int {
        let keyring = try crypto.get()
        let records: [WrappedKey]
        do { records = try KeyBundle.decode(Array(data)) } catch {
            throw .malformedInput("key bundle: \(error.description)")
        }
        return try mappingErrors { try keyring.importWrapped(records) }
    }

    /// The old name of ``exportDataKeys()``.
    @available(*, deprecated, renamed: "exportDataKeys()")
    public func exportKeys() throws(ChronicleError) -> Data { try exportDataKeys() }

    /// The old name of ``importDataKeys(_:)``.
    @available(*, deprecated, renamed: "importDataKeys(_:)")
    @discardableResult
    public func importKeys(_ data: Data) throws(ChronicleError) -> Int { try importDataKeys(data) }

    // MARK: - Internals

    /// Whether plain values are sealed in this store.
    var sealsDefaults: Bool { configuration.encryptDefaults }

    /// The keyring that seals changes in `domain`, or `nil` when the domain is not sealed.
    func sealer(for domain: Domain) throws(ChronicleError) -> Keyring? {
        guard domain == .secrets || sealsDefaults else { return nil }
        return try crypto.get()
    }

    /// The plaintext payload of a view entry (opened when sealed).
    func openPayload(_ entry: ViewEntry, key: AnyKey) throws(ChronicleError) -> [UInt8] {
        try openPayload(entry, domain: key.domain, name: key.name)
    }

    /// The payload of `entry`, opened when sealed under `name` in `domain`.
    func openPayload(_ entry: ViewEntry, domain: Domain, name: String) throws(ChronicleError) -> [UInt8] {
        guard entry.sealed else { return entry.payload }
        let keyring = try crypto.get()
        return try mappingErrors { try keyring.open(entry, domain: domain, key: name) }
    }
}
