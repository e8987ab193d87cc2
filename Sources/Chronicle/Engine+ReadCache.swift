import LMDB
import Synchronization

/// Decoded values of plain keys, valid while the environment's last
/// transaction id is unchanged (any commit of any process invalidates it).
struct ReadCache: ~Copyable {
    struct Slot {
        let type: ObjectIdentifier
        /// The decoded value, or `nil` when the key has no value (absent or removed).
        let value: (any Sendable)?
    }

    var transactionID = -1
    var slots: [String: Slot] = [:]
}

extension Engine {
    /// Reads a plain key through the decoded-value cache; `nil` when the key has no value.
    ///
    /// A warm read costs a check of the environment's last transaction id
    /// (one read of the meta page) and a dictionary lookup; no LMDB
    /// transaction and no decoding.
    func cachedRead<V: Sendable>(
        _ name: String, as type: V.Type, decode: (ViewEntry) throws(ChronicleError) -> V
    ) throws(ChronicleError) -> V? {
        let current = environment.lastTransactionID
        let typeID = ObjectIdentifier(V.self)
        let hit: V?? = readCache.withLock { cache in
            guard cache.transactionID == current, let slot = cache.slots[name], slot.type == typeID else { return nil }
            guard let value = slot.value else { return .some(nil) }
            return (value as? V).map { .some($0) }
        }
        if let hit { return hit }
        let (entry, snapshot) = try mappingErrors {
            try environment.read { txn in
                let bytes = try txn.get(dbs.defaults, key: Array(name.utf8))
                let entry = try bytes.map { bytes throws(ChronicleError) in try ViewEntry.decoding(bytes, key: name) }
                return (entry, txn.id)
            }
        }
        var value: V?
        if let entry, entry.op == .set { value = try decode(entry) }
        readCache.withLock { cache in
            if cache.transactionID != snapshot {
                cache.transactionID = snapshot
                cache.slots.removeAll(keepingCapacity: true)
            }
            cache.slots[name] = ReadCache.Slot(type: typeID, value: value)
        }
        return value
    }
}
