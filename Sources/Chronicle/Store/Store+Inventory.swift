import ChronicleFormat
import ChronicleLog
extension Store {
    /// Removes the values of several keys in one transaction, a tombstone each: their
    /// defaults show again. Returns after the commit is durable.
    ///
    /// ```swift
    /// try store.reset(.theme, .launches)
    /// ```
    public func reset(_ keys: AnyKey...) throws(ChronicleError) {
        var changes: [PendingChange] = []
        for key in keys { changes.append(try removal(of: key)) }
        try commit(changes)
    }

    /// Removes every key of `domain` in one transaction, a tombstone each (removed keys stay
    /// removed; their history stays). Returns the number of keys removed.
    ///
    /// ```swift
    /// let removed = try store.removeAll(in: .defaults)
    /// ```
    @discardableResult
    public func removeAll(in domain: Domain) throws(ChronicleError) -> Int {
        let eventLog = try settledEventLog
        let entries = try mappingErrors { try eventLog.inspection.viewEntries(domain) }
        var changes: [PendingChange] = []
        for (name, entry) in entries where entry.op == .set {
            changes.append(PendingChange(domain: domain, key: name, policy: entry.policy, op: .remove, encoding: ValueEncoding.data.rawValue, payload: [], sealer: try sealer(for: domain)))
        }
        try commit(changes)
        return changes.count
    }

    /// Whether `key` has a stored value (set, and not removed since), as opposed to showing its
    /// default. This process's own changes count at once. Errors are logged and read as `false`.
    public func hasValue(for key: AnyKey) -> Bool {
        do {
            try AnyKey.validate(name: key.name)
            let eventLog = try eventLog
            let entry = try mappingErrors { try eventLog.entry(key.domain, key.name) }
            return entry?.op == .set
        } catch {
            log(error, "read", key)
            return false
        }
    }
}
