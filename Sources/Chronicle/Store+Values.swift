public import Foundation

/// A key with a value type and a default: ``Key`` or ``SecretKey``.
protocol ValueKey: Keys {
    associatedtype Value: Codable & Sendable
    var defaultValue: Value { get }
}

extension Key: ValueKey {}
extension SecretKey: ValueKey {}

extension Store {
    /// The read behind `store[key]` and `@Default` for plain keys: straight to the cache.
    func plainValue<Value>(_ key: Key<Value>) throws(ChronicleError) -> Value {
        guard key.formerNames.isEmpty, !sealsDefaults else { return try readValue(key, default: key.defaultValue) }
        try Keys.validate(name: key.name)
        return try engine.cachedRead(key.name, default: key.defaultValue) { entry throws(ChronicleError) in
            try self.decode(entry, for: key, default: key.defaultValue)
        }
    }

    /// Reads a key's current value, falling back to former names, then to `defaultValue`.
    func readValue<K: ValueKey>(_ key: K, default defaultValue: K.Value) throws(ChronicleError) -> K.Value {
        try Keys.validate(name: key.name)
        let engine = try engine
        if key.domain == .defaults, !sealsDefaults, key.formerNames.isEmpty {
            return try engine.cachedRead(key.name, default: defaultValue) { entry throws(ChronicleError) in
                try self.decode(entry, for: key, default: defaultValue)
            }
        }
        let entry = try mappingErrors { try engine.entry(key.domain, key.name) }
        return try decode(entry, for: key, default: defaultValue)
    }

    func decode<K: ValueKey>(_ entry: ViewEntry?, for key: K, default defaultValue: K.Value) throws(ChronicleError) -> K.Value {
        var entry = entry
        if entry == nil, !key.formerNames.isEmpty {
            entry = try formerEntry(of: key)
        }
        guard let entry, entry.op == .set else { return defaultValue }
        let payload = try openPayload(entry, key: key)
        return try ValueCoder.decode(K.Value.self, encoding: entry.encoding, payload: payload, key: key.name)
    }

    /// The newest entry among a renamed key's former names.
    private func formerEntry(of key: Keys) throws(ChronicleError) -> ViewEntry? {
        let engine = try engine
        var newest: ViewEntry?
        for name in key.formerNames {
            guard let entry = try mappingErrors({ try engine.entry(key.domain, name) }) else { continue }
            if let current = newest, !(entry.hlc > current.hlc) { continue }
            newest = entry
        }
        return newest
    }

    /// A set (or, for `nil`, a remove) of `key` as a pending change, validated and encoded.
    func change<K: ValueKey>(_ value: K.Value, for key: K) throws(ChronicleError) -> PendingChange {
        try Keys.validate(name: key.name)
        if ValueCoder.isNil(value) { return try removal(of: key) }
        let (encoding, payload) = try ValueCoder.encode(value, key: key.name)
        guard payload.count <= configuration.maxValueSize else {
            throw .valueTooLarge(key: key.name, size: payload.count, limit: configuration.maxValueSize)
        }
        return PendingChange(
            domain: key.domain, key: key.name, policy: key.sync, op: .set, encoding: encoding.rawValue, payload: payload,
            sealer: try sealer(for: key.domain))
    }

    /// A remove of `key` as a pending change.
    func removal(of key: Keys) throws(ChronicleError) -> PendingChange {
        try Keys.validate(name: key.name)
        return PendingChange(
            domain: key.domain, key: key.name, policy: key.sync, op: .remove, encoding: ValueEncoding.data.rawValue, payload: [],
            sealer: try sealer(for: key.domain))
    }

    func revisions<K: ValueKey>(of key: K) throws(ChronicleError) -> [Revision<K.Value>] {
        try Keys.validate(name: key.name)
        let engine = try engine
        let events = try mappingErrors { try engine.history(key.domain, key.name) }
        var revisions: [Revision<K.Value>] = []
        revisions.reserveCapacity(events.count)
        for committed in events {
            let event = committed.event
            var value: K.Value?
            if event.op == .set {
                let payload = try openPayload(ViewEntry(event: event, sequence: committed.sequence), key: key)
                value = try ValueCoder.decode(K.Value.self, encoding: event.encoding, payload: payload, key: key.name)
            }
            revisions.append(Revision(value: value, event: event, sequence: committed.sequence, localReplica: engine.replica))
        }
        return revisions
    }
}

/// One revision of a key, from its history.
///
/// The `description` of a secret's revision never shows its value.
public struct Revision<Value: Sendable>: Sendable, CustomStringConvertible {
    /// The value set, or `nil` for a remove.
    public let value: Value?
    /// `true` when this revision removed the value.
    public let isRemoval: Bool
    /// When the change was made (the event's hybrid logical clock, as wall time).
    public let date: Date
    /// The event's hybrid logical clock reading (the conflict-resolution order).
    public let timestamp: HLC
    /// The local log sequence of the event.
    public let sequence: UInt64
    /// The replica that made the change.
    public let origin: ReplicaID
    /// `true` when this replica made the change.
    public let isLocal: Bool
    /// `true` for a revision of a ``SecretKey``.
    public let isSecret: Bool

    init(value: Value?, event: Event, sequence: UInt64, localReplica: ReplicaID) {
        self.value = value
        isRemoval = event.op == .remove
        date = Date(timeIntervalSince1970: Double(event.hlc.milliseconds) / 1000)
        timestamp = event.hlc
        self.sequence = sequence
        origin = event.origin
        isLocal = event.origin == localReplica
        isSecret = event.domain == .secrets
    }

    public var description: String {
        let shown: String
        if isRemoval {
            shown = "removed"
        } else if isSecret {
            shown = "<redacted>"
        } else {
            shown = value.map { String(describing: $0) } ?? "nil"
        }
        return "Revision(#\(sequence), \(shown), at \(timestamp), by \(origin.short))"
    }
}

extension Revision: Equatable where Value: Equatable {}
