extension Store {
    /// Reads `key`, lets `body` change the value, and writes the result, atomically: no write of
    /// another thread or process lands between the read and the write (two processes each adding
    /// 1 three hundred times end at 600). Returns after the commit is durable, like ``set(_:for:)-(_,Key<Value>)``.
    ///
    /// ```swift
    /// let launches = try store.update(.launches) { $0 += 1 }
    /// ```
    ///
    /// `body` sees the committed value (the default when absent) and may run more than once
    /// (when another writer got in first it runs again on that writer's value): keep it free of
    /// side effects, and write nothing to the store from it. Setting an optional value to `nil`
    /// removes the key.
    /// - Returns: the value written.
    /// - Throws: what `body` throws (then nothing is written), or a ``ChronicleError``.
    @discardableResult
    public func update<Value>(_ key: Key<Value>, _ body: (inout Value) throws -> Void) throws -> Value {
        try updating(key, body)
    }

    /// Reads the secret `key`, lets `body` change the value, and seals and writes the result,
    /// atomically (see ``update(_:_:)-(Key<Value>,_)``).
    @discardableResult
    public func update<Value>(_ key: SecretKey<Value>, _ body: (inout Value) throws -> Void) throws -> Value {
        try updating(key, body)
    }

    /// A queued change of the key must commit before it can be read as committed.
    private struct QueuedChange: Error {}

    /// What the caller's closure threw, kept apart from the store's own errors.
    private struct BodyFailure: Error { var error: any Error }

    /// The read-modify-write behind `update`: the value is read under the lock that orders local
    /// writes and the write commits only if the key's entry is still the one read (its conflict
    /// order, checked inside the write transaction); otherwise it reads again.
    private func updating<K: ValueKey>(_ key: K, _ body: (inout K.Value) throws -> Void) throws -> K.Value {
        try Keys.validate(name: key.name)
        let eventLog = try eventLog
        for _ in 0..<1_000 {
            var written = key.defaultValue
            do {
                _ = try eventLog.commitVisibly { entry in
                    let visible = try entry(key.domain, key.name)
                    if visible?.ticket != nil { throw QueuedChange() }
                    var value = try decode(visible?.entry, for: key, default: key.defaultValue)
                    do { try body(&value) } catch { throw BodyFailure(error: error) }
                    written = value
                    var change = try self.change(value, for: key)
                    change.expectedOrder = .some(visible?.entry.order)
                    return try prepared([change])
                }
                return written
            } catch is StaleRead {
                continue  // another writer's change landed between the read and the commit: read again
            } catch is QueuedChange {
                try mappingErrors { try eventLog.settlePending() }
            } catch let failure as BodyFailure {
                throw failure.error
            } catch {
                throw ChronicleError.wrap(eventLog.mappedDiskError(error))
            }
        }
        throw ChronicleError.storeUnavailable(reason: "the key \(key.name) kept changing while it was updated; try again")
    }
}
