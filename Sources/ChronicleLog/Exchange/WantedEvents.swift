@_spi(Wire) package import ChronicleFormat
package import ChronicleLMDB

/// Events a member received and lost before it could apply them: the quarantine evicted them,
/// or had no room for them, while they waited for their key. Their identities are kept under
/// the key each waits for, and once the member holds that key it asks its peers for them by
/// identity (docs/FORMAT.md 7.6): the quarantine never loses a genuine event for good, whatever
/// a stranger floods it with.
///
/// `meta` `want/` ‖ key id ‖ writer ‖ u64 counter → u64 Unix ms it was lost ‖ u8 times asked ‖
/// u8 answers cut short before it (absent in entries of builds before it: 0).
/// At most ``capacity``; past it, the entries lost longest ago are forgotten (a tenth at once),
/// and at most once a day (`meta` `want.rewound`: u64 Unix ms of the last time) the member marks
/// its pull checkpoints for deletion (`want.rewind`): its next sync deletes them before it
/// reads any, and pulls each peer from the start, so what a flood pushed out of the list arrives
/// again (identities make that safe). The sync in progress keeps its own place: the mark waits
/// for the next. A flood costs a member at most one pull of everything a day. An entry is
/// forgotten once the log holds its identity, or after ``maxAsks`` answers from peers that had
/// room for it and did not bring it (an answer says which identities it had room for).
package enum WantedEvents {
    package static let prefix = Array("want/".utf8)
    /// The most identities a member keeps asking for.
    package static let capacity = 16_384
    /// How many answers from peers that had room for an identity, and did not bring it, it is
    /// asked for before it is forgotten.
    package static let maxAsks: UInt8 = 16
    /// How many answers that ran out of room before an identity it is asked for before it is
    /// forgotten all the same: a peer that always says so cannot keep an entry for ever.
    package static let maxCutShort: UInt8 = 64

    private static func entryKey(_ keyID: KeyID, _ identity: EventIdentity) -> [UInt8] {
        prefix + keyID.bytes + identity.dot
    }

    /// Records that these events (each with the key it waits for) were lost.
    package static func record(_ lost: [(EventIdentity, KeyID)], now: UInt64, _ txn: borrowing Transaction, _ dbs: Databases) throws {
        guard !lost.isEmpty else { return }
        for (identity, keyID) in lost {
            try txn.put(dbs.meta, key: entryKey(keyID, identity), value: now.bigEndianBytes + [0])
        }
        var entries: [(key: [UInt8], lost: UInt64)] = []
        try txn.scanInPlace(dbs.meta, from: prefix) { key, value in
            guard key.starts(with: prefix) else { return false }
            entries.append((Array(key), value.count >= 8 ? UInt64(bigEndian: value.loadUnaligned(as: UInt64.self)) : 0))
            return true
        }
        guard entries.count > capacity else { return }
        for entry in entries.sorted(by: { $0.lost < $1.lost }).prefix(entries.count - capacity + capacity / 10) {
            try txn.delete(dbs.meta, key: entry.key)
        }
        let rewound = try txn.get(dbs.meta, key: rewoundKey).flatMap { UInt64(bigEndianBytes: $0) } ?? 0
        guard now >= rewound &+ rewindInterval || now < rewound else { return }
        try txn.put(dbs.meta, key: rewindKey, value: [1])
        try txn.put(dbs.meta, key: rewoundKey, value: now.bigEndianBytes)
    }

    /// When a flood last made this member pull every peer from the start.
    static let rewoundKey = Array("want.rewound".utf8)
    /// Present while the next sync is to delete every pull checkpoint first.
    static let rewindKey = Array("want.rewind".utf8)
    /// The least time between two such pulls (a day, in ms).
    static let rewindInterval: UInt64 = 86_400_000

    /// Deletes every pull checkpoint (`peers` keys whose direction byte is 1, docs/FORMAT.md 7.5).
    static func forgetPullCheckpoints(_ txn: borrowing Transaction, _ dbs: Databases) throws {
        var pulls: [[UInt8]] = []
        try txn.scanInPlace(dbs.peers) { key, _ in
            if key.count == 34, key[32] == 1 { pulls.append(Array(key)) }
            return true
        }
        for key in pulls { try txn.delete(dbs.peers, key: key) }
    }

    /// The identity and awaited key of a quarantined event item (an event or a newer format's
    /// item with a trailing authenticator); `nil` for anything else.
    package static func identity(ofQuarantined bytes: [UInt8]) -> (EventIdentity, KeyID)? {
        switch bytes.withUnsafeBytes({ Event.parse($0) }) {
        case let .success(.event(event)):
            guard let keyID = event.authenticator?.keyID else { return nil }
            return (EventIdentity(writer: event.origin, counter: event.counter), keyID)
        case let .success(.opaque(item)):
            guard let (keyID, _) = Event.trailingAuthenticator(bytes) else { return nil }
            return (EventIdentity(writer: item.origin, counter: item.counter), keyID)
        case .failure:
            return nil
        }
    }

    /// Up to `limit` wanted identities whose key this log holds a record of (a member stores only
    /// records that opened). Entries whose identity the log holds now are deleted.
    package static func due(limit: Int, _ txn: borrowing Transaction, _ dbs: Databases) throws -> [EventIdentity] {
        var found: [EventIdentity] = []
        var held: [KeyID: Bool] = [:]
        var arrived: [[UInt8]] = []
        try txn.scan(dbs.meta, from: prefix) { key, _ in
            guard key.starts(with: prefix), found.count < limit else { return false }
            let body = Array(key.dropFirst(prefix.count))
            guard body.count == 16 + 24, let keyID = KeyID(bytes: Array(body[0..<16])), let identity = EventIdentity(dot: Array(body[16...])) else {
                arrived.append(key)  // not an entry this build wrote
                return true
            }
            if try txn.get(dbs.dots, key: identity.dot) != nil {
                arrived.append(key)
                return true
            }
            if held[keyID] == nil { held[keyID] = try txn.get(dbs.meta, key: MetaKey.wrappedKey(keyID)) != nil }
            if held[keyID] == true { found.append(identity) }
            return true
        }
        for key in arrived { try txn.delete(dbs.meta, key: key) }
        return found
    }

    /// After a peer answered a request for `asked`: entries whose identity the log holds now are
    /// deleted; each other one the peer had room for counts one more answer without it, and is
    /// deleted after ``maxAsks``. `whole` is, for each distinct identity of `asked` in order of
    /// first mention, whether the peer had room for it; `nil` (an older peer that does not say)
    /// counts every answer, as before, so its retries stay bounded.
    package static func settle(asked: [EventIdentity], whole: [Bool]?, _ txn: borrowing Transaction, _ dbs: Databases) throws {
        guard !asked.isEmpty else { return }
        let distinct = EventIdentity.distinct(asked)
        let wanted = Set(distinct)
        // A claim of another length counts as not said: every entry counts, as with an older peer.
        var cut = Set<EventIdentity>()
        if let whole, whole.count == distinct.count {
            for (identity, answered) in zip(distinct, whole) where !answered { cut.insert(identity) }
        }
        var entries: [(key: [UInt8], identity: EventIdentity, value: [UInt8])] = []
        try txn.scan(dbs.meta, from: prefix) { key, value in
            guard key.starts(with: prefix) else { return false }
            if key.count == prefix.count + 40, let identity = EventIdentity(dot: Array(key[(prefix.count + 16)...])), wanted.contains(identity) {
                entries.append((key, identity, value))
            }
            return true
        }
        for entry in entries {
            let asked = entry.value.count >= 9 ? entry.value[8] : 0
            if try txn.get(dbs.dots, key: entry.identity.dot) != nil {
                try txn.delete(dbs.meta, key: entry.key)
            } else if cut.contains(entry.identity) {
                // The peer ran out of room before it: the answer says nothing of it, and counts
                // against a larger bound of its own, so no peer keeps an entry for ever.
                let cutShort = entry.value.count >= 10 ? entry.value[9] : 0
                if cutShort >= maxCutShort - 1 {
                    try txn.delete(dbs.meta, key: entry.key)
                } else {
                    try txn.put(dbs.meta, key: entry.key, value: Array(entry.value.prefix(8)) + [asked, cutShort + 1])
                }
            } else if asked >= maxAsks - 1 {
                try txn.delete(dbs.meta, key: entry.key)
            } else {
                let cutShort = entry.value.count >= 10 ? entry.value[9] : 0
                try txn.put(dbs.meta, key: entry.key, value: Array(entry.value.prefix(8)) + [asked + 1, cutShort])
            }
        }
    }

    /// How many identities are wanted.
    package static func count(_ txn: borrowing Transaction, _ dbs: Databases) throws -> Int {
        var count = 0
        try txn.scanInPlace(dbs.meta, from: prefix) { key, _ in
            guard key.starts(with: prefix) else { return false }
            count += 1
            return true
        }
        return count
    }
}

extension WantedEvents {
    /// Deletes every pull checkpoint when a flood of lost events marked them: a sync calls it
    /// before it reads its checkpoint. Returns whether it did.
    @discardableResult
    package static func rewindPullsIfMarked(in storage: LogStorage) throws -> Bool {
        let (environment, dbs) = (storage.environment, storage.dbs)
        guard try environment.read({ txn in try txn.get(dbs.meta, key: rewindKey) != nil }) else { return false }
        return try environment.write { txn in
            guard try txn.get(dbs.meta, key: rewindKey) != nil else { return false }
            try forgetPullCheckpoints(txn, dbs)
            try txn.delete(dbs.meta, key: rewindKey)
            return true
        }
    }

    /// Up to `limit` identities of lost events whose key the log now holds, to ask peers for.
    package static func due(limit: Int = EventIdentity.maxPerRequest, in storage: LogStorage) throws -> [EventIdentity] {
        let (environment, dbs) = (storage.environment, storage.dbs)
        let empty = try environment.read { txn in
            var any = false
            try txn.scanInPlace(dbs.meta, from: prefix) { key, _ in
                any = key.starts(with: prefix)
                return false
            }
            return !any
        }
        guard !empty else { return [] }
        return try environment.write { txn in try due(limit: limit, txn, dbs) }
    }

    /// Settles the wanted identities a peer was asked for and answered (``settle(asked:whole:_:_:)``).
    package static func settle(asked: [EventIdentity], whole: [Bool]?, in storage: LogStorage) throws {
        guard !asked.isEmpty else { return }
        try storage.environment.write { txn in try settle(asked: asked, whole: whole, txn, storage.dbs) }
    }

    /// How many lost events the log still asks for.
    package static func count(in storage: LogStorage) throws -> Int {
        try storage.environment.read { txn in try count(txn, storage.dbs) }
    }
}
