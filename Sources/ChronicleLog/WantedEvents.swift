package import ChronicleFormat
package import ChronicleLMDB

/// Events a member received and lost before it could apply them: the quarantine evicted them,
/// or had no room for them, while they waited for their key. Their identities are kept under
/// the key each waits for, and once the member holds that key it asks its peers for them by
/// identity (docs/FORMAT.md 7.6): the quarantine never loses a genuine event for good, whatever
/// a stranger floods it with.
///
/// `meta` `want/` ‖ key id ‖ writer ‖ u64 counter → u64 Unix ms it was lost ‖ u8 times asked.
/// At most ``capacity``; past it, the entries lost longest ago are forgotten (a tenth at once).
/// An entry is forgotten when a peer answers it (whatever the import then does with the event)
/// or after ``maxAsks`` syncs that found no peer holding it.
package enum WantedEvents {
    package static let prefix = Array("want/".utf8)
    /// The most identities a member keeps asking for.
    package static let capacity = 16_384
    /// How many times an identity is asked for before it is forgotten.
    package static let maxAsks: UInt8 = 16

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
    /// records that opened), counting each as asked once more; entries asked ``maxAsks`` times
    /// are forgotten instead.
    package static func due(limit: Int, _ txn: borrowing Transaction, _ dbs: Databases) throws -> [EventIdentity] {
        var found: [(key: [UInt8], identity: EventIdentity, value: [UInt8])] = []
        var held: [KeyID: Bool] = [:]
        var rows: [(key: [UInt8], value: [UInt8])] = []
        try txn.scan(dbs.meta, from: prefix) { key, value in
            guard key.starts(with: prefix) else { return false }
            rows.append((key, value))
            return true
        }
        for (key, value) in rows {
            guard found.count < limit else { break }
            let body = Array(key.dropFirst(prefix.count))
            guard body.count == 16 + 24, let keyID = KeyID(bytes: Array(body[0..<16])), let identity = EventIdentity(dot: Array(body[16...])) else {
                try txn.delete(dbs.meta, key: key)  // not an entry this build wrote
                continue
            }
            if try txn.get(dbs.dots, key: identity.dot) != nil {
                try txn.delete(dbs.meta, key: key)  // it arrived meanwhile
                continue
            }
            if held[keyID] == nil { held[keyID] = try txn.get(dbs.meta, key: MetaKey.wrappedKey(keyID)) != nil }
            guard held[keyID] == true else { continue }
            found.append((key, identity, value))
        }
        for entry in found {
            let asked = entry.value.count >= 9 ? entry.value[8] : 0
            if asked + 1 >= maxAsks {
                try txn.delete(dbs.meta, key: entry.key)
            } else {
                try txn.put(dbs.meta, key: entry.key, value: Array(entry.value.prefix(8)) + [asked + 1])
            }
        }
        return found.map(\.identity)
    }

    /// Forgets the wanted entries of `identities` (a peer answered them).
    package static func forget(_ identities: Set<EventIdentity>, _ txn: borrowing Transaction, _ dbs: Databases) throws {
        guard !identities.isEmpty else { return }
        var doomed: [[UInt8]] = []
        try txn.scanInPlace(dbs.meta, from: prefix) { key, _ in
            guard key.starts(with: prefix) else { return false }
            if key.count == prefix.count + 40, let identity = EventIdentity(dot: Array(key[(prefix.count + 16)...])), identities.contains(identity) {
                doomed.append(Array(key))
            }
            return true
        }
        for key in doomed { try txn.delete(dbs.meta, key: key) }
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

extension EventLog {
    /// Up to `limit` identities of lost events whose key this log now holds, to ask peers for.
    package func dueWantedEvents(limit: Int = EventIdentity.maxPerRequest) throws -> [EventIdentity] {
        let empty = try environment.read { txn in try WantedEvents.count(txn, dbs) == 0 }
        guard !empty else { return [] }
        return try environment.write { txn in try WantedEvents.due(limit: limit, txn, dbs) }
    }

    /// Forgets the wanted identities a peer answered.
    package func forgetWantedEvents(_ identities: Set<EventIdentity>) throws {
        guard !identities.isEmpty else { return }
        try environment.write { txn in try WantedEvents.forget(identities, txn, dbs) }
    }

    /// How many lost events this member still asks for.
    package func wantedEventCount() throws -> Int {
        try environment.read { txn in try WantedEvents.count(txn, dbs) }
    }

    /// The events of this log with these identities (the first version of each, as logged; an
    /// identity compacted away or never held is left out), at most about `maxBytes` of payload,
    /// with the key records they name, in a range that moves no checkpoint: `after` and `upTo`
    /// are both this log's head.
    package func exportEvents(_ identities: [EventIdentity], maxBytes: Int) throws -> EventRange {
        try environment.read { txn in
            let head = try LogHead.read(txn, dbs)
            var events: [Event] = []
            var bytes = 0
            for identity in identities.prefix(EventIdentity.maxPerRequest) {
                guard let sequence = try txn.get(dbs.dots, key: identity.dot).flatMap({ UInt64(bigEndianBytes: $0) }), sequence != 0,
                    let value = try txn.get(dbs.events, key: sequence.bigEndianBytes)
                else { continue }
                let record = try LogRecord(decoding: value, sequence: sequence)
                guard record.kind == .event else { continue }
                let event = try record.event(sequence: sequence)
                if !events.isEmpty, bytes + event.payload.count > maxBytes { break }
                events.append(event)
                bytes += event.payload.count + 64
            }
            var keyIDs: [KeyID] = []
            for event in events { for id in event.namedKeyIDs where !keyIDs.contains(id) { keyIDs.append(id) } }
            let keys = try keyIDs.flatMap { id in (try keyRecords.travelKey(id, txn).map { [$0] } ?? []) + (try keyRecords.alternateKeys(id, txn)) }
            let chain = try chainHash(at: head.sequence, txn)
            return EventRange(
                source: replica, epoch: try Self.epoch(txn, dbs), after: head.sequence, upTo: head.sequence, head: head.sequence,
                afterChain: chain, upToChain: chain, keys: keys, events: events, opaque: [])
        }
    }
}
