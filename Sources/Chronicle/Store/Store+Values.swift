import ChronicleFormat
import ChronicleLog
import Foundation

extension Store {
    /// The read behind `store[key]` and `@Default` for plain keys: straight to the cache.
    func plainValue<Value>(_ key: Key<Value>) throws(ChronicleError) -> Value {
        guard key.domain == .defaults, key.formerNames.isEmpty, !sealsDefaults else { return try readValue(key, default: key.defaultValue) }
        try AnyKey.validate(name: key.name)
        return try eventLog.cachedRead(key.name, default: key.defaultValue) { entry throws(ChronicleError) in
            try self.decode(entry, for: key, default: key.defaultValue)
        }
    }

    /// Reads a key's current value, falling back to former names, then to `defaultValue`.
    func readValue<K: ValueKey>(_ key: K, default defaultValue: K.Value) throws(ChronicleError) -> K.Value {
        try AnyKey.validate(name: key.name)
        let eventLog = try eventLog
        if key.domain == .defaults, !sealsDefaults, key.formerNames.isEmpty {
            return try eventLog.cachedRead(key.name, default: defaultValue) { entry throws(ChronicleError) in
                try self.decode(entry, for: key, default: defaultValue)
            }
        }
        let entry = try mappingErrors { try eventLog.entry(key.domain, key.name) }
        return try decode(entry, for: key, default: defaultValue)
    }

    func decode<K: ValueKey>(_ entry: ViewEntry?, for key: K, default defaultValue: K.Value) throws(ChronicleError) -> K.Value {
        var (entry, name) = (entry, key.name)
        if entry == nil, !key.formerNames.isEmpty, let former = try formerEntry(of: key) {
            (entry, name) = (former.entry, former.name)
        }
        guard let entry, entry.op == .set else { return defaultValue }
        // A sealed value is opened under the name it was sealed with (the seal binds it).
        let payload = try openPayload(entry, domain: key.domain, name: name)
        return try ValueCoder.decode(K.Value.self, encoding: entry.encoding, payload: payload, key: key.name)
    }

    /// The newest entry among a renamed key's former names, and the name it is under.
    private func formerEntry(of key: AnyKey) throws(ChronicleError) -> (entry: ViewEntry, name: String)? {
        let eventLog = try eventLog
        var newest: (entry: ViewEntry, name: String)?
        for name in key.formerNames {
            guard let entry = try mappingErrors({ try eventLog.entry(key.domain, name) }) else { continue }
            if let current = newest, !(entry.hlc > current.entry.hlc) { continue }
            newest = (entry, name)
        }
        return newest
    }

    /// A set (or, for `nil`, a remove) of `key` as a pending change, validated and encoded.
    func change<K: ValueKey>(_ value: K.Value, for key: K) throws(ChronicleError) -> PendingChange {
        try AnyKey.validate(name: key.name)
        if ValueCoder.isNil(value) { return try removal(of: key) }
        let (encoding, payload) = try ValueCoder.encode(value, key: key.name)
        guard payload.count <= configuration.maxValueSize else {
            throw .valueTooLarge(key: key.name, size: payload.count, limit: configuration.maxValueSize)
        }
        return PendingChange(
            domain: key.domain, key: key.name, policy: key.sync, op: .set, encoding: encoding.rawValue, payload: payload,
            sealer: try sealer(for: key.domain), retention: .some(key.retention))
    }

    /// A remove of `key` as a pending change.
    func removal(of key: AnyKey) throws(ChronicleError) -> PendingChange {
        try AnyKey.validate(name: key.name)
        return PendingChange(
            domain: key.domain, key: key.name, policy: key.sync, op: .remove, encoding: ValueEncoding.data.rawValue, payload: [],
            sealer: try sealer(for: key.domain), retention: .some(key.retention))
    }

    func revisions<K: ValueKey>(of key: K) throws(ChronicleError) -> [Revision<K.Value>] {
        try AnyKey.validate(name: key.name)
        let eventLog = try settledEventLog
        let events = try mappingErrors { try eventLog.history(key.domain, key.name) }
        var revisions: [Revision<K.Value>] = []
        revisions.reserveCapacity(events.count)
        for committed in events {
            let event = committed.event
            var value: K.Value?
            if event.op == .set {
                let payload = try openPayload(ViewEntry(event: event, sequence: committed.sequence), key: key)
                value = try ValueCoder.decode(K.Value.self, encoding: event.encoding, payload: payload, key: key.name)
            }
            revisions.append(Revision(value: value, event: event, sequence: committed.sequence, localReplica: eventLog.replica))
        }
        return revisions
    }
}
