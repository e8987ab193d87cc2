import Sodium

/// The store's data keys, unwrapped with the configured key source.
final class Keyring: Sendable {
    static func open(engine: Engine, configuration: Store.Configuration) -> Result<Keyring, ChronicleError> {
        .failure(.keyUnavailable(reason: "sealed values are not supported yet"))
    }
}

extension Store {
    /// Whether plain values are sealed in this store.
    var sealsDefaults: Bool { configuration.encryptDefaults }

    func requireSealingAvailable(for domain: Domain) throws(ChronicleError) {
        if domain == .secrets || sealsDefaults { _ = try crypto.get() }
    }

    /// The plaintext payload of a view entry (opened when sealed).
    func openPayload(_ entry: ViewEntry, key: Keys) throws(ChronicleError) -> [UInt8] {
        guard entry.sealed else { return entry.payload }
        _ = try crypto.get()
        throw .keyUnavailable(reason: "sealed values are not supported yet")
    }
}
