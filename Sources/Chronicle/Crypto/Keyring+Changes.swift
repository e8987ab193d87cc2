import ChronicleSodium
import Foundation
import Synchronization

extension Keyring {
    // MARK: - Changing keys

    /// Re-wraps every data key under a new key source; the data keys (and so every sealed event) stay.
    func changeSource(to newSource: Source) throws {
        try eventLog.writeKeyRecords { txn, _ in
            let keys = try eventLog.wrappedKeys(txn).map { ($0, try unwrap($0)) }
            let now = UnixMilliseconds.now()
            let wrapping = try wrappingKey(for: newSource, reusing: nil)  // one fresh salt, one Argon2id run
            for (record, key) in keys {
                let wrapped = try WrappedKey.wrap(
                    key, id: record.id, kind: wrapping.kind, salt: wrapping.salt, limits: wrapping.limits, created: now, kek: wrapping.kek)
                try eventLog.putWrappedKey(wrapped, txn)
            }
        }
        state.withLock { state in
            state.source = newSource
            state.keks.removeAll()  // KEKs of the old passphrase
        }
    }

    /// Makes a new data key active; older keys keep opening older events.
    func rotate() throws -> KeyID {
        try eventLog.writeKeyRecords { txn, _ in
            let (id, _) = try createKey(txn)
            try eventLog.setActiveKeyID(id, txn)
            return id
        }
    }

    /// Every wrapped data key (never a plaintext key).
    func wrappedKeys() throws -> [WrappedKey] {
        try eventLog.readKeyRecords { txn in try eventLog.wrappedKeys(txn) }
    }

    /// Stores wrapped keys received from another replica, after checking that each unwraps here.
    func importWrapped(_ records: [WrappedKey]) throws -> Int {
        let existing = Set(try wrappedKeys().map(\.id))
        let fresh = records.filter { !existing.contains($0.id) }
        let unwrapped = try fresh.map { ($0, try unwrap($0)) }  // all or nothing: .wrongKey before any write
        try eventLog.writeKeyRecords { txn, _ in
            for (record, _) in unwrapped { try eventLog.putWrappedKey(record, txn) }
        }
        state.withLock { state in
            for (record, key) in unwrapped { state.dataKeys[record.id] = key }
        }
        return unwrapped.count
    }
}
