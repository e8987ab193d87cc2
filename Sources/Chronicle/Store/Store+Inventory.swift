extension Store {
    /// Removes the values of several keys in one transaction, a tombstone each: their
    /// defaults show again. Returns after the commit is durable.
    ///
    /// ```swift
    /// try store.reset(.theme, .launches)
    /// ```
    public func reset(_ keys: Keys...) throws(ChronicleError) {
        var changes: [PendingChange] = []
        for key in keys { changes.append(try removal(of: key)) }
        try commit(changes)
    }

    /// Whether `key` has a stored value (set, and not removed since), as opposed to showing its
    /// default. This process's own changes count at once. Errors are logged and read as `false`.
    public func hasValue(for key: Keys) -> Bool {
        do {
            try Keys.validate(name: key.name)
            let eventLog = try eventLog
            let entry = try mappingErrors { try eventLog.entry(key.domain, key.name) }
            return entry?.op == .set
        } catch {
            log(error, "read", key)
            return false
        }
    }
}
