package import ChronicleFormat
import Synchronization

/// Decoded values of plain keys, valid while the environment's last
/// transaction id is unchanged (any commit of any process invalidates it).
/// Found by `String` equality, a slot answers only a name of the same bytes.
/// Only all-ASCII names are cached.
package struct ReadCache: ~Copyable {
    package struct Slot {
        package let type: ObjectIdentifier
        /// The decoded value, or `nil` when the key has no value (absent or removed).
        package let value: (any Sendable)?
        /// The length in UTF-8 of the name read, which is all ASCII (other names are not cached).
        let asciiCount: Int

        /// Whether this slot is `other`'s, which the dictionary found as canonically equivalent
        /// (`String` equality): two names the store keeps apart by their bytes, such as "Key" and
        /// "\u{212A}ey" (KELVIN SIGN decomposes to "K"), would share a slot.
        ///
        /// Comparing lengths is enough: a string canonically equivalent to an ASCII one decomposes
        /// to it, so each of its non-ASCII scalars has a canonical decomposition that is all ASCII.
        /// Only three scalars have one, each a single ASCII scalar: U+037E (";", 2 bytes for 1),
        /// U+1FEF ("`", 3 for 1) and U+212A ("K", 3 for 1); Unicode's stability policy freezes
        /// decompositions. So the same length means no such scalar: the same bytes. A hit costs
        /// one length check (O(1) for a native string) and no reference counting.
        func holds(_ other: String) -> Bool { other.utf8.count == asciiCount }
    }

    /// Whether reads of `name` are cached: only all-ASCII names, which ``Slot/holds(_:)`` tells
    /// apart by length. Other names (an NFC and an NFD spelling, say) are read from the store.
    static func caches(_ name: String) -> Bool { name.utf8.allSatisfy { $0 < 0x80 } }

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
        if let pending = local.pendingEntry(.defaults, name) {  // this process's own write, not committed yet
            return pending.op == .set ? try decode(pending) : defaultValue
        }
        let current = lastTransactionID
        let typeID = ObjectIdentifier(V.self)
        let slot: ReadCache.Slot? = readCache.withLock { cache in
            cache.transactionID == current ? cache.slots[name] : nil
        }
        if let slot, slot.type == typeID, slot.holds(name) {
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
        guard ReadCache.caches(name) else { return result }
        readCache.withLock { cache in
            if cache.transactionID != snapshot {
                cache.transactionID = snapshot
                cache.slots.removeAll(keepingCapacity: true)
            }
            cache.slots[name] = ReadCache.Slot(type: typeID, value: value, asciiCount: name.utf8.count)
        }
        return result
    }
}
