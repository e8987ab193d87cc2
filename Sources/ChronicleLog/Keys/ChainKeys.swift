package import ChronicleFormat
package import ChronicleSodium
import Synchronization

/// The keys of keyed hash chains, by the id of the data key they derive from.
///
/// A store whose log is keyed (see ``LogHead/chainKeyID``) hashes each record
/// with `BLAKE2b-256(key: chain subkey)`; the subkey is
/// `crypto_kdf_derive_from_key(32, id: 2, context: "chr.chan", data key)`.
/// The keyring installs a subkey when it unwraps the data key; the log asks for
/// it on every append and replay.
package final class ChainKeys: Sendable {
    private let keys = Mutex<[KeyID: KeyedHash]>([:])

    /// Derives and installs the chain subkey of data key `id`.
    package func install(id: KeyID, from dataKey: SecureBytes) {
        guard let subkey = try? KeyDerivation.derive(length: 32, id: 2, context: "chr.chan", from: dataKey),
            let subkey = try? KeyedHash(key: subkey, length: LogRecord.hashLength)
        else { return }
        keys.withLock { $0[id] = subkey }
    }

    /// The key of a keyed chain, or `nil` for an unkeyed one (`id == nil`).
    /// - Throws: `.keyUnavailable` when the chain is keyed and its key was not installed.
    package func key(_ id: KeyID?) throws(ChronicleError) -> KeyedHash? {
        guard let id else { return nil }
        guard let key = keys.withLock({ $0[id] }) else {
            throw .keyUnavailable(reason: "this store's log is keyed; open it with its key source to write or verify it")
        }
        return key
    }
}
