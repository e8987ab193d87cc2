import ChronicleFormat
import ChronicleLMDB

extension EventLog {
    /// The key records' rows, read and written inside a caller's transaction.
    package var keyTables: KeyTables { KeyTables(storage: storage) }
}

/// The rows of `meta` that hold data keys (`dk/<id>`, `dk.active`, `chain.key`, travel wraps and
/// alternates; docs/FORMAT.md section 2), read and written inside a transaction the caller holds:
/// what an import, an export and the keyring's own operations (``KeyRecords``) share. It needs the
/// log's storage and nothing else of the log.
package struct KeyTables: Sendable {
    let storage: LogStorage

    private var dbs: Databases { storage.dbs }
}

extension KeyTables {
    /// The id of the key that seals new events, if any.
    func activeKeyID(_ txn: borrowing Transaction) throws -> KeyID? {
        try txn.get(dbs.meta, key: MetaKey.activeKey).map { try KeyID(metaEntry: "active key", $0) }
    }

    func setActiveKeyID(_ id: KeyID, _ txn: borrowing Transaction) throws {
        try txn.put(dbs.meta, key: MetaKey.activeKey, value: id.bytes)
    }

    /// The id of the data key whose chain subkey keys the hash chain (`nil`: an unkeyed chain).
    func chainKeyID(_ txn: borrowing Transaction) throws -> KeyID? {
        try txn.get(dbs.meta, key: MetaKey.chainKey).map { try KeyID(metaEntry: "chain key", $0) }
    }

    /// The wrapped data key `id`, or `nil` when this replica does not hold it.
    func wrappedKey(_ id: KeyID, _ txn: borrowing Transaction) throws -> WrappedKey? {
        guard let bytes = try txn.get(dbs.meta, key: MetaKey.wrappedKey(id)) else { return nil }
        do { return try WrappedKey(decoding: bytes) } catch {
            throw ChronicleError.corruptKeyRecord(id: id.description, reason: error.description)
        }
    }

    /// The ids of every wrapped data key, in key order.
    func wrappedKeyIDs(_ txn: borrowing Transaction) throws -> [KeyID] {
        var ids: [KeyID] = []
        try txn.scan(dbs.meta, from: MetaKey.wrappedKeyPrefix) { key, _ in
            guard key.starts(with: MetaKey.wrappedKeyPrefix) else { return false }
            ids.append(try KeyID(metaEntry: "wrapped key name", key.dropFirst(MetaKey.wrappedKeyPrefix.count)))
            return true
        }
        return ids
    }

    /// Every wrapped data key (never a plaintext key).
    func wrappedKeys(_ txn: borrowing Transaction) throws -> [WrappedKey] {
        try wrappedKeyIDs(txn).compactMap { id in try wrappedKey(id, txn) }
    }

    /// The wrapped data key `id` as it travels: its travel wrap when it has one, else as stored.
    func travelKey(_ id: KeyID, _ txn: borrowing Transaction) throws -> WrappedKey? {
        if let bytes = try txn.get(dbs.meta, key: MetaKey.travelKey(id)) {
            do { return try WrappedKey(decoding: bytes) } catch {
                throw ChronicleError.corruptKeyRecord(id: id.description, reason: "travel wrap: \(error.description)")
            }
        }
        return try wrappedKey(id, txn)
    }

    /// Whether data key `id` has a travel wrap.
    func hasTravelKey(_ id: KeyID, _ txn: borrowing Transaction) throws -> Bool {
        try txn.get(dbs.meta, key: MetaKey.travelKey(id)) != nil
    }

    /// Stores the travel wrap of a data key.
    func putTravelKey(_ record: WrappedKey, _ txn: borrowing Transaction) throws {
        try txn.put(dbs.meta, key: MetaKey.travelKey(record.id), value: record.encoded())
    }

    /// Stores a wrapped data key (replacing a record with the same id).
    func putWrappedKey(_ record: WrappedKey, _ txn: borrowing Transaction) throws {
        try txn.put(dbs.meta, key: MetaKey.wrappedKey(record.id), value: record.encoded())
    }

    /// Stores each wrapped key this log does not hold yet; returns how many were new. A different
    /// record under an id it holds is kept as an alternate to relay: at most ``alternatesPerKey``
    /// per id, the earliest arrivals (the first record is never replaced; once the alternates
    /// are full, a new one replaces the newest). Junk sent after the real record never pushes it
    /// out; a carrier that knows an id must send more than that many records before the real
    /// one first reaches this relay to keep it from here (members still get it from any peer
    /// that has it).
    @discardableResult
    func addWrappedKeys(_ records: [WrappedKey], _ txn: borrowing Transaction) throws -> Int {
        var added = 0
        let now = UnixMilliseconds.now()
        for record in records {
            let encoded = record.encoded()
            guard let existing = try txn.get(dbs.meta, key: MetaKey.wrappedKey(record.id)) else {
                try putWrappedKey(record, txn)
                added += 1
                continue
            }
            guard existing != encoded else { continue }
            try addAlternate(encoded, id: record.id, arrival: now, txn)
        }
        return added
    }

    /// Keeps `record` (a wrapped key's bytes, of any version) as an alternate under `id`, unless
    /// it is there already; past ``alternatesPerKey`` it replaces the newest alternate, so the
    /// earliest arrivals stay. Arrivals under one id are strictly increasing (a record arriving
    /// in the same millisecond as the newest counts one more), so "newest" is never a tie.
    func addAlternate(_ record: [UInt8], id: KeyID, arrival: UInt64, _ txn: borrowing Transaction) throws {
        let alternates = try alternateEntries(id, txn)
        guard !alternates.contains(where: { $0.value == record }) else { return }
        let newest = alternates.max { $0.arrival < $1.arrival }  // ties only among records stored before arrivals were
        if alternates.count >= KeyRecords.alternatesPerKey, let newest { try txn.delete(dbs.meta, key: newest.key) }
        let stamped = max(arrival, (newest?.arrival ?? 0) &+ 1)
        try txn.put(dbs.meta, key: MetaKey.alternateKey(id, record, arrival: stamped), value: record)
    }

    /// Keeps wrapped-key records of a newer build (a version or kind this build cannot open) to
    /// relay, as alternates under the key id every version keeps at the same place: only records
    /// an item of the batch names (`named`), of at most ``newerKindRecordLimit`` bytes.
    func addNewerKindKeys(_ records: [[UInt8]], named: Set<KeyID>, _ txn: borrowing Transaction) throws {
        let now = UnixMilliseconds.now()
        for record in records where record.count <= KeyRecords.newerKindRecordLimit {
            guard let id = WrappedKey.keyID(ofRecord: record), named.contains(id) else { continue }
            try addAlternate(record, id: id, arrival: now, txn)
        }
    }

    /// The alternate records under key id `id` that this build cannot decode (a newer build's).
    func newerKindKeys(_ id: KeyID, _ txn: borrowing Transaction) throws -> [[UInt8]] {
        try alternateEntries(id, txn).map(\.value).filter { WrappedKey.isOfNewerKind($0) }
    }

    /// The alternate records kept under key id `id`, with their `meta` keys and arrival (0: before it was recorded).
    private func alternateEntries(_ id: KeyID, _ txn: borrowing Transaction) throws -> [(key: [UInt8], arrival: UInt64, value: [UInt8])] {
        let prefix = MetaKey.alternateKeyPrefix + id.bytes
        var entries: [(key: [UInt8], arrival: UInt64, value: [UInt8])] = []
        try txn.scan(dbs.meta, from: prefix) { key, value in
            guard key.starts(with: prefix) else { return false }
            let arrival = key.count == prefix.count + 16 ? UInt64(bigEndianBytes: Array(key[prefix.count..<prefix.count + 8])) ?? 0 : 0
            entries.append((key, arrival, value))
            return true
        }
        return entries
    }

    /// The alternate records kept under key id `id`.
    func alternateKeys(_ id: KeyID, _ txn: borrowing Transaction) throws -> [WrappedKey] {
        try alternateEntries(id, txn).compactMap { try? WrappedKey(decoding: $0.value) }
    }
}
