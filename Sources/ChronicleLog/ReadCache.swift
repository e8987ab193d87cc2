package import ChronicleFormat
import Synchronization

/// Decoded values of plain keys, valid while the environment's last
/// transaction id is unchanged (any commit of any process invalidates it).
package struct ReadCache: ~Copyable {
    package struct Slot {
        package let type: ObjectIdentifier
        /// The decoded value, or `nil` when the key has no value (absent or removed).
        package let value: (any Sendable)?
    }

    package var transactionID = -1
    package var slots: [String: Slot] = [:]
}

extension EventLog {
    /// Reads a plain key through the decoded-value cache; `defaultValue` when the key has no value.
    ///
    /// A warm read costs a check of the environment's last transaction id
    /// (one read of the meta page) and a dictionary lookup; no LMDB
    /// transaction and no decoding. The hit path asks for no generic type
    /// beyond `V` itself: it sits under every property-wrapper read.
    package func cachedRead<V: Sendable>(
        _ name: String, default defaultValue: V, decode: (ViewEntry) throws(ChronicleError) -> V
    ) throws(ChronicleError) -> V {
        if let pending = pendingEntry(.defaults, name) {  // this process's own write, not committed yet
            return pending.op == .set ? try decode(pending) : defaultValue
        }
        let current = lastTransactionID
        let typeID = ObjectIdentifier(V.self)
        let slot: ReadCache.Slot? = readCache.withLock { cache in
            cache.transactionID == current ? cache.slots[name] : nil
        }
        if let slot, slot.type == typeID {
            guard let stored = slot.value else { return defaultValue }
            if let value = stored as? V { return value }
        }
        let (entry, snapshot) = try mappingErrors { try entryAndSnapshot(.defaults, name) }
        var value: (any Sendable)?
        var result = defaultValue
        if let entry, entry.op == .set {
            result = try decode(entry)
            value = result
        }
        readCache.withLock { cache in
            if cache.transactionID != snapshot {
                cache.transactionID = snapshot
                cache.slots.removeAll(keepingCapacity: true)
            }
            cache.slots[name] = ReadCache.Slot(type: typeID, value: value)
        }
        return result
    }
}
