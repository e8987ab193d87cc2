package import ChronicleFormat
package import ChronicleLMDB
import ChronicleSodium

/// Wrapped keys received in a range, sorted before the import's write transaction:
/// those to store, and those to set aside with a reason.
package struct KeyScreening: Sendable {
    package var accepted: [WrappedKey] = []
    package var rejected: [(WrappedKey, QuarantinedItem.Reason, String)] = []
    /// Quarantined key records (by quarantine id) this screening tried again: they leave the
    /// quarantine before the import sets anything aside.
    package var retired: [UInt64] = []

    package init(accepted: [WrappedKey] = [], rejected: [(WrappedKey, QuarantinedItem.Reason, String)] = [], retired: [UInt64] = []) {
        self.accepted = accepted
        self.rejected = rejected
        self.retired = retired
    }
}

/// How much the quarantine holds, read once per import transaction and kept up to date by it.
package struct QuarantineSpace {
    package var count: Int
    package var bytes: Int
    /// Set when the quarantine is full of waiting items: an item that never applies finds no
    /// room for the rest of the transaction (without scanning it again for each).
    package var onlyWaitingLeft = false
    /// The ids of the items this transaction set aside (or found set aside already) that the
    /// quarantine still holds: an import's receipt counts these, not items evicted again.
    package var held: Set<[UInt8]> = []
}

/// The quarantine: items peers sent that failed validation or authentication.
///
/// An item's id is the first 8 bytes of BLAKE2b-256(kind ‖ bytes), so the same item
/// sent again (in every later batch, by a hostile or confused peer) is stored once.
///
/// Bounded by ``quarantineCapacity`` items and ``quarantineByteCapacity`` bytes, so what any
/// number of strangers send costs a member at most that much disk. Items that may still apply
/// (``QuarantinedItem/Reason/isWaiting``) are kept whole up to ``waitingItemLimit`` each; every
/// other item keeps what lists it, at most ``quarantinedBytesLimit`` (an event without its
/// payload). When full, items that will never apply are evicted first, oldest first; a waiting
/// item evicts the oldest waiting ones only when nothing else is left. A waiting event that is
/// evicted, finds no room or is larger than ``waitingItemLimit`` is not lost: its identity is
/// kept (``WantedEvents``) and asked for again once its key is here.
package struct Quarantine: Sendable {
    /// What it reads and writes: the quarantine's database of the log's environment.
    let storage: LogStorage

    private var environment: Environment { storage.environment }
    private var dbs: Databases { storage.dbs }
}

extension EventLog {
    package var quarantine: Quarantine { Quarantine(storage: storage) }
}

extension Quarantine {
    /// Sets an item aside; returns whether it was kept.
    @discardableResult
    package func setAside(
        _ kind: QuarantinedItem.Kind, _ reason: QuarantinedItem.Reason, detail: String, bytes: [UInt8], source: String, now: UInt64,
        _ space: inout QuarantineSpace?, _ txn: borrowing Transaction
    ) throws -> Bool {
        let id = Array(GenericHash.hash([[kind.rawValue], bytes], length: 32).prefix(8))
        if space == nil { space = try quarantineSpace(txn) }
        guard try txn.get(dbs.quarantine, key: id) == nil else {
            space?.held.insert(id)
            return true
        }
        if reason.isWaiting, bytes.count > Self.waitingItemLimit {
            if kind == .event, let lost = WantedEvents.identity(ofQuarantined: bytes) { try WantedEvents.record([lost], now: now, txn, dbs) }
            return false
        }
        let kept = reason.isWaiting ? bytes : Self.listable(kind, bytes)
        let value = QuarantineRecord(kind: kind, reason: reason, arrival: now, source: source, detail: detail, bytes: kept).encoded()
        guard var current = space, value.count <= Self.quarantineByteCapacity else { return false }
        if current.count + 1 > Self.quarantineCapacity || current.bytes + value.count > Self.quarantineByteCapacity {
            guard reason.isWaiting || !current.onlyWaitingLeft, try makeRoom(for: value.count, waiting: reason.isWaiting, now: now, &current, txn) else {
                if !reason.isWaiting { current.onlyWaitingLeft = true }
                space = current
                // A waiting event with no room is lost: asked for again once its key is here.
                if kind == .event, reason.isWaiting, let lost = WantedEvents.identity(ofQuarantined: bytes) {
                    try WantedEvents.record([lost], now: now, txn, dbs)
                }
                return false
            }
        }
        try txn.put(dbs.quarantine, key: id, value: value)
        current.count += 1
        current.bytes += value.count
        current.held.insert(id)
        space = current
        return true
    }

    package static let quarantineCapacity = 10_000
    package static let quarantineByteCapacity = 16 << 20
    /// The most bytes kept of an item that never applies.
    package static let quarantinedBytesLimit = 4 << 10
    /// The largest waiting item kept whole; a larger one is asked for again instead.
    package static let waitingItemLimit = 1 << 20

    /// What the quarantine keeps of an item that never applies: enough to list it. An event
    /// over the limit keeps every field but its payload; anything else its first bytes.
    static func listable(_ kind: QuarantinedItem.Kind, _ bytes: [UInt8]) -> [UInt8] {
        guard bytes.count > quarantinedBytesLimit else { return bytes }
        if kind == .event, case var .success(.event(event)) = bytes.withUnsafeBytes({ Event.parse($0) }) {
            event.payload = []
            let stripped = event.encoded()
            if stripped.count <= quarantinedBytesLimit { return stripped }
        }
        return Array(bytes.prefix(quarantinedBytesLimit))
    }

    package func quarantineSpace(_ txn: borrowing Transaction) throws -> QuarantineSpace {
        var space = QuarantineSpace(count: 0, bytes: 0)
        try txn.scanInPlace(dbs.quarantine) { _, value in
            space.count += 1
            space.bytes += value.count
            return true
        }
        return space
    }

    /// Evicts items until `size` more bytes and one more item fit, with a tenth of the capacity
    /// to spare (one scan serves many arrivals): items that never apply first, oldest first, then
    /// (only for a waiting newcomer) the oldest waiting ones, whose identities are recorded as
    /// wanted (``WantedEvents``). Returns whether room was made.
    private func makeRoom(for size: Int, waiting: Bool, now: UInt64, _ space: inout QuarantineSpace, _ txn: borrowing Transaction) throws -> Bool {
        var candidates: [(waiting: Bool, arrival: UInt64, key: [UInt8], size: Int)] = []
        try txn.scanInPlace(dbs.quarantine) { key, value in
            let header = QuarantineRecord.peek(value)
            let isWaiting = header?.reason.isWaiting ?? false
            if waiting || !isWaiting { candidates.append((isWaiting, header?.arrival ?? 0, Array(key), value.count)) }
            return true
        }
        candidates.sort { ($0.waiting ? 1 : 0, $0.arrival) < ($1.waiting ? 1 : 0, $1.arrival) }
        let countTarget = Self.quarantineCapacity - Self.quarantineCapacity / 10 - 1
        let byteTarget = Self.quarantineByteCapacity - Self.quarantineByteCapacity / 10 - size
        var lost: [(EventIdentity, KeyID)] = []
        for candidate in candidates {
            if space.count <= countTarget && space.bytes <= byteTarget { break }
            if candidate.waiting, let value = try txn.get(dbs.quarantine, key: candidate.key),
                let record = try? QuarantineRecord(decoding: value), record.kind == .event,
                let identity = WantedEvents.identity(ofQuarantined: record.bytes)
            {
                lost.append(identity)
            }
            try txn.delete(dbs.quarantine, key: candidate.key)
            space.count -= 1
            space.bytes -= candidate.size
            space.held.remove(candidate.key)
        }
        try WantedEvents.record(lost, now: now, txn, dbs)
        return space.count + 1 <= Self.quarantineCapacity && space.bytes + size <= Self.quarantineByteCapacity
    }

    /// Takes out of the quarantine every item waiting for its key that now verifies (its key
    /// arrived since), for the caller to apply (events) or keep to relay (newer formats).
    package func releaseQuarantined(verifiedBy verifier: any EventVerifier, _ txn: borrowing Transaction) throws -> (events: [Event], opaque: [OpaqueEvent]) {
        var keys: [[UInt8]] = []
        var events: [Event] = []
        var opaque: [OpaqueEvent] = []
        var waiting: [[UInt8]] = []
        try txn.scanInPlace(dbs.quarantine) { key, value in
            if let header = QuarantineRecord.peek(value), header.kind == .event, header.reason == .awaitingKey || header.reason == .unauthenticated {
                waiting.append(Array(key))
            }
            return true
        }
        for key in waiting {
            guard let value = try txn.get(dbs.quarantine, key: key), let record = try? QuarantineRecord(decoding: value) else { continue }
            switch record.bytes.withUnsafeBytes({ Event.parse($0) }) {
            case let .success(.event(event)) where verifier.verify(event) == nil:
                events.append(event)
            case let .success(.opaque(item)) where verifier.verifyOpaque(record.bytes) == nil:
                opaque.append(item)
            default:
                continue
            }
            keys.append(key)
        }
        for key in keys { try txn.delete(dbs.quarantine, key: key) }
        return (events, opaque)
    }

    /// The key records an earlier import set aside for want of derivation budget, oldest first.
    package func deferredKeyRecords() throws -> [(quarantineID: UInt64, record: WrappedKey)] {
        try deferredKeyRecordsWithSources().map { ($0.quarantineID, $0.record) }
    }

    /// ``deferredKeyRecords()``, each with the source it came from.
    package func deferredKeyRecordsWithSources() throws -> [(quarantineID: UInt64, record: WrappedKey, source: String)] {
        try environment.read { txn in
            var found: [(UInt64, UInt64, WrappedKey, String)] = []
            try txn.scanInPlace(dbs.quarantine) { key, value in
                guard let header = QuarantineRecord.peek(value), header.kind == .wrappedKey, header.reason == .derivationBudget,
                    let id = UInt64(bigEndianBytes: Array(key)), let record = try? QuarantineRecord(decoding: Array(value)),
                    let wrapped = try? WrappedKey(decoding: record.bytes)
                else { return true }
                found.append((header.arrival, id, wrapped, record.source))
                return true
            }
            return found.sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map { ($0.1, $0.2, $0.3) }
        }
    }

    /// The key ids that quarantined events waiting for their key name.
    package func waitingKeyIDs() throws -> Set<KeyID> {
        try environment.read { txn in
            var ids = Set<KeyID>()
            try txn.scanInPlace(dbs.quarantine) { _, value in
                guard let header = QuarantineRecord.peek(value), header.kind == .event,
                    header.reason == .awaitingKey || header.reason == .unauthenticated,
                    let record = try? QuarantineRecord(decoding: Array(value))
                else { return true }
                if let event = try? Event(decoding: record.bytes) {
                    ids.formUnion(event.namedKeyIDs)
                } else if let (id, _) = Event.trailingAuthenticator(record.bytes) {
                    ids.insert(id)  // an item of a newer format
                }
                return true
            }
            return ids
        }
    }

    /// Every quarantined item, oldest first.
    package func quarantinedItems() throws -> [QuarantinedItem] {
        try environment.read { txn in
            var items: [QuarantinedItem] = []
            try txn.scan(dbs.quarantine) { key, value in
                guard let id = UInt64(bigEndianBytes: key) else { return true }
                do {
                    items.append(try QuarantineRecord(decoding: value).item(id: id))
                } catch {
                    throw ChronicleError.corruptMeta(entry: "quarantine \(id)", reason: "\(error)")
                }
                return true
            }
            return items.sorted { ($0.date, $0.id) < ($1.date, $1.id) }
        }
    }

    /// The number of quarantined items.
    package func quarantineCount() throws -> Int {
        try environment.read { txn in try txn.count(dbs.quarantine) }
    }

    /// Drops the quarantined items with these ids (all of them for `nil`); returns how many were dropped.
    package func dropQuarantined(_ ids: [UInt64]?) throws -> Int {
        try environment.write { txn in
            guard let ids else {
                let count = try txn.count(dbs.quarantine)
                try txn.clear(dbs.quarantine)
                return count
            }
            var dropped = 0
            for id in ids where try txn.get(dbs.quarantine, key: id.bigEndianBytes) != nil {
                try txn.delete(dbs.quarantine, key: id.bigEndianBytes)
                dropped += 1
            }
            return dropped
        }
    }
}
