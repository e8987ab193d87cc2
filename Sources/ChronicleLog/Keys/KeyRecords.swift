package import ChronicleFormat
import ChronicleLMDB
package import ChronicleSodium

extension EventLog {
    /// The key records of this log: what the keyring holds instead of the log.
    package var keyRecords: KeyRecords { KeyRecords(log: self) }
}

/// The data-key records of `meta` (`dk/<id>`, `dk.active`, `chain.key`, travel and alternate
/// keys) and the key records the quarantine holds, as named operations: what the keyring holds
/// of a log. It never sees the schema, and cannot write an event, read a view or import a range.
package struct KeyRecords: Sendable {
    private let log: EventLog

    init(log: EventLog) { self.log = log }

    private var environment: Environment { log.environment }
    private var dbs: Databases { log.dbs }
    /// The rows it reads and writes inside its transactions.
    private var tables: KeyTables { log.keyTables }
    /// The chain keys the log hashes with (the keyring installs them once it opens a key).
    package var chainKeys: ChainKeys { log.chainKeys }

    // MARK: - What the keyring asks, each in a transaction of its own

    /// The ids of the active key and of the key that keys the chain (`nil`: none).
    package func activeAndChainKeyIDs() throws -> (active: KeyID?, chain: KeyID?) {
        try readKeyRecords { txn in (try tables.activeKeyID(txn), try tables.chainKeyID(txn)) }
    }

    /// The active key's record, if a key is active and its record is here.
    package func activeRecord() throws -> WrappedKey? {
        try readKeyRecords { txn in try tables.activeKeyID(txn).flatMap { try tables.wrappedKey($0, txn) } }
    }

    /// The wrapped data key `id`, or `nil` when this replica does not hold it.
    package func wrappedKey(_ id: KeyID) throws -> WrappedKey? {
        try readKeyRecords { txn in try tables.wrappedKey(id, txn) }
    }

    /// The ids of every wrapped data key, in key order.
    package func wrappedKeyIDs() throws -> [KeyID] {
        try readKeyRecords { txn in try tables.wrappedKeyIDs(txn) }
    }

    /// Every wrapped data key (never a plaintext key).
    package func wrappedKeys() throws -> [WrappedKey] {
        try readKeyRecords { txn in try tables.wrappedKeys(txn) }
    }

    /// The wrapped data keys that have no travel wrap yet.
    package func wrappedKeysWithoutTravelWrap() throws -> [WrappedKey] {
        try readKeyRecords { txn in try tables.wrappedKeys(txn).filter { try !tables.hasTravelKey($0.id, txn) } }
    }

    /// Every wrapped data key as it travels: its travel wrap when it has one, else as stored.
    package func travelKeys() throws -> [WrappedKey] {
        try readKeyRecords { txn in try tables.wrappedKeyIDs(txn).compactMap { try tables.travelKey($0, txn) } }
    }

    /// Stores wrapped data keys (replacing records with the same ids), in one transaction.
    package func putWrappedKeys(_ records: [WrappedKey]) throws {
        guard !records.isEmpty else { return }
        _ = try writeKeyRecords { txn, _ in for record in records { try tables.putWrappedKey(record, txn) } }
    }

    /// Stores travel wraps of data keys, in one transaction.
    package func putTravelKeys(_ records: [WrappedKey]) throws {
        guard !records.isEmpty else { return }
        _ = try writeKeyRecords { txn, _ in for record in records { try tables.putTravelKey(record, txn) } }
    }

    /// Replaces every wrapped data key with what `rewrap` makes of it, in one transaction (a
    /// key that arrives meanwhile is rewrapped too, or the whole change fails).
    package func rewrapAll(_ rewrap: (WrappedKey) throws -> WrappedKey) throws {
        _ = try writeKeyRecords { txn, _ in
            let rewrapped = try tables.wrappedKeys(txn).map(rewrap)
            for record in rewrapped { try tables.putWrappedKey(record, txn) }
        }
    }

    /// Stores the record `make` returns and makes it the active key (older keys keep opening
    /// older events), in one write transaction: `make` gets the active key's record, if it is
    /// readable (a passphrase reuses its salt). Returns the new key's id.
    package func activateNewKey(_ make: (_ active: WrappedKey?) throws -> WrappedKey) throws -> KeyID {
        try writeKeyRecords { txn, _ in
            let active = try tables.activeKeyID(txn).flatMap { try? tables.wrappedKey($0, txn) }
            let record = try make(active)
            try tables.putWrappedKey(record, txn)
            try tables.setActiveKeyID(record.id, txn)
            return record.id
        }
    }

    /// Makes sure a key is active, in one write transaction: `sealer` unwraps the active key
    /// (another process may have made it a moment ago), or makes a first one, which is stored,
    /// made active and keys the chain (see ``sealingKey(_:_:_:)``).
    package func ensureActiveKey(_ sealer: any EventSealer) throws {
        _ = try writeKeyRecords { txn, head in try sealingKey(sealer, txn, &head) }
    }

    /// Keys the hash chain with data key `id` when it is not keyed yet (see ``keyChain(with:dataKey:_:_:)``).
    package func keyChain(with id: KeyID, dataKey: SecureBytes) throws {
        _ = try writeKeyRecords { txn, head in try keyChain(with: id, dataKey: dataKey, creatingKey: false, txn, &head) }
    }

    /// The key `sealer` seals and authenticates with in this transaction: the active key, or a
    /// first key the sealer makes, which is stored here, made active and keys the chain.
    func sealingKey(_ sealer: any EventSealer, _ txn: borrowing Transaction, _ head: inout LogHead) throws -> SealingKey {
        let key = try sealer.sealingKey(active: try tables.activeKeyID(txn)) { id in try tables.wrappedKey(id, txn) }
        if let created = key.created {
            try tables.putWrappedKey(created, txn)
            try tables.setActiveKeyID(key.id, txn)
            try keyChain(with: key.id, dataKey: key.key, creatingKey: true, txn, &head)
        }
        return key
    }

    /// Whether the log shows that this store held a key of its own: a chain-key record, or an
    /// event of this replica that is sealed or carries an authenticator (a relay, which never
    /// made a key, has neither).
    /// - Parameter chainKeyRecordOnly: look for a chain-key record only.
    package func logShowsAKeyOfItsOwn(chainKeyRecordOnly: Bool = false) throws -> Bool {
        try readKeyRecords { txn in
            if try LogMeta.firstChainKeyRecord(txn, dbs) != nil { return true }
            if chainKeyRecordOnly { return false }
            let own = log.replica
            var found = false
            try txn.scanInPlace(dbs.events) { _, value in
                guard value.first == RecordKind.event.rawValue, value.count > 1 + LogRecord.hashLength else { return true }
                let body = UnsafeRawBufferPointer(rebasing: value[1..<(value.count - LogRecord.hashLength)])
                if case let .success(.event(event)) = Event.parse(body), event.replica == own, event.sealed || event.authenticator != nil {
                    found = true
                }
                return !found
            }
            return found
        }
    }

    /// Checks the head MAC with the installed chain key (see ``LogHead/checkMAC(_:_:keys:)``).
    package func checkHeadMAC() throws {
        try readKeyRecords { txn in try LogHead.read(txn, dbs).checkMAC(txn, dbs, keys: chainKeys) }
    }

    // MARK: -

    /// The key records an earlier import set aside for want of derivation budget, oldest first.
    package func deferredKeyRecords() throws -> [(quarantineID: UInt64, record: WrappedKey)] { try log.quarantine.deferredKeyRecords() }

    /// ``deferredKeyRecords()``, each with the source it came from.
    package func deferredKeyRecordsWithSources() throws -> [(quarantineID: UInt64, record: WrappedKey, source: String)] {
        try log.quarantine.deferredKeyRecordsWithSources()
    }

    /// Copies every wrapped data key this log holds into `target`'s log (those it lacks).
    package func copyWrappedKeys(to target: KeyRecords) throws {
        let records = try readKeyRecords { txn in try tables.wrappedKeys(txn) }
        _ = try target.writeKeyRecords { txn, _ in try target.tables.addWrappedKeys(records, txn) }
    }

    /// The key ids that quarantined events waiting for their key name.
    package func waitingKeyIDs() throws -> Set<KeyID> { try log.quarantine.waitingKeyIDs() }

    /// Runs `body` in a read transaction.
    func readKeyRecords<R>(_ body: (borrowing Transaction) throws -> R) throws -> R {
        try environment.read { txn in try body(txn) }
    }

    /// Runs `body` in a write transaction with the log head, which is written back when `body` returns.
    func writeKeyRecords<R>(_ body: (borrowing Transaction, inout LogHead) throws -> R) throws -> R {
        try log.withHead(.always, body)
    }

    /// Keys the hash chain with data key `id` from now on, when it is not keyed yet: appends a
    /// chain-key record (hashed with the new key) naming the key, so the log itself says where
    /// its chain became keyed and no edit of `meta` can turn it back. Returns whether it did.
    ///
    /// The new key vouches for what is there, so what is there is verified first: a log that holds
    /// a chain-key record already had its `meta` edited to forget the key (refused), and the
    /// unkeyed chain must hold up to the head (its records, its gaps' checksums, the head's
    /// sequence and hash), else a cut or forged log would be signed. That is one read of the log,
    /// once in a store's life (its first data key, or a store keyed by format 1 after its first events).
    /// - Throws: `.corruptMeta("chain.key", …)`, `.corruptRecord` or `.corruptMeta("seq"/"chain", …)`; nothing is written.
    ///
    /// Events this replica authenticated, or sealed before this store had a key (`creatingKey`),
    /// cannot sit in a chain never keyed: they were written while it held a key, so its key
    /// records or its chain-key record were deleted (a store keyed by format 1 after its first
    /// events did seal its own events in an unkeyed chain, and keys it with `creatingKey` false).
    @discardableResult
    func keyChain(
        with id: KeyID, dataKey: SecureBytes, creatingKey: Bool, _ txn: borrowing Transaction, _ head: inout LogHead
    ) throws -> Bool {
        guard head.chainKeyID == nil else { return false }
        if let sequence = try LogMeta.firstChainKeyRecord(txn, dbs) { throw LogMeta.forgottenChainKey(at: sequence) }
        let own = log.replica
        let replay = try log.replayer.replayLog(txn) { sequence, event in
            guard event.replica == own, event.authenticator != nil || (creatingKey && event.sealed) else { return }
            throw ChronicleError.corruptRecord(
                sequence: sequence,
                reason: "this replica \(event.authenticator != nil ? "authenticated" : "sealed") this event, so it held a data key, yet its "
                    + "chain was never keyed: the store's key records or its chain-key record were deleted. Nothing was written")
        }
        guard replay.covered == head.sequence, replay.chain == head.chain else {
            throw ChronicleError.corruptMeta(
                entry: replay.covered == head.sequence ? "chain" : "seq",
                reason: "the head (\(head.sequence) records) is not the end of the log (\(replay.covered)): the log or its head was "
                    + "edited, and keying the chain now would vouch for it. Nothing was written")
        }
        chainKeys.install(id: id, from: dataKey)
        try appendChainKeyRecord(id, txn, &head)
        try txn.put(dbs.meta, key: MetaKey.chainKey, value: id.bytes)
        try txn.put(dbs.meta, key: MetaKey.chainInLog, value: [1])
        head.chainKeyID = id
        // The gaps made before were checked above as checksums; they verify under the key from now on.
        try log.gaps.remacGaps(with: try chainKeys.key(id), txn)
        return true
    }

    /// Appends the record that keys the chain from itself on with data key `id`'s chain subkey.
    func appendChainKeyRecord(_ id: KeyID, _ txn: borrowing Transaction, _ head: inout LogHead) throws {
        try log.appendRecord(LogRecord.unchained(.chainKey, body: id.bytes), key: try chainKeys.key(id), txn, &head)
    }

    /// The largest key record of a newer build kept to relay (today's are about 140 bytes).
    package static let newerKindRecordLimit = 4096

    /// The most alternate records a store keeps under one key id.
    package static let alternatesPerKey = 16

    // MARK: - Records that did not open

    /// Which of `tags` name received records this member derived for before and could not open.
    package func unopened(_ tags: [[UInt8]]) throws -> Set<[UInt8]> {
        guard !tags.isEmpty else { return [] }
        return try environment.read { txn in
            Set(try tags.filter { try txn.get(dbs.meta, key: MetaKey.unopenedKey($0)) != nil })
        }
    }

    /// Remembers that the records `tags` name did not open, in a write transaction of its own
    /// (what a derivation taught stays learnt whether or not the import commits). At most
    /// ``unopenedCapacity`` are kept, the oldest forgotten first: a record forgotten costs one
    /// derivation again, never a refusal.
    package func rememberUnopened(_ tags: [[UInt8]], now: UInt64 = UnixMilliseconds.now()) throws {
        guard !tags.isEmpty else { return }
        try environment.write { txn in
            for tag in tags { try txn.put(dbs.meta, key: MetaKey.unopenedKey(tag), value: now.bigEndianBytes) }
            var entries: [(key: [UInt8], tried: UInt64)] = []
            try txn.scan(dbs.meta, from: MetaKey.unopenedKeyPrefix) { key, value in
                guard key.starts(with: MetaKey.unopenedKeyPrefix) else { return false }
                entries.append((key, UInt64(bigEndianBytes: value) ?? 0))
                return true
            }
            guard entries.count > Self.unopenedCapacity else { return }
            for entry in entries.sorted(by: { $0.tried < $1.tried }).prefix(entries.count - Self.unopenedCapacity) {
                try txn.delete(dbs.meta, key: entry.key)
            }
        }
    }

    /// The most received records a member remembers as not opening (16 bytes of tag and 8 of
    /// time each).
    package static let unopenedCapacity = 4096

}
