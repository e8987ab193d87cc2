import ChronicleFormat
import ChronicleLog
extension Store {
    /// Reads `key`, lets `body` change the value, and writes the result, atomically: no write of
    /// another thread or process lands between the read and the write (two processes each adding
    /// 1 three hundred times end at 600). Returns after the commit is durable, like ``set(_:for:)-(_,Key<Value>)``.
    ///
    /// ```swift
    /// let launches = try store.update(.launches) { $0 += 1 }
    /// ```
    ///
    /// `body` sees the value as this process reads it (the default when absent) and may run more
    /// than once (when another writer got in first it runs again on that writer's value): keep it
    /// free of side effects. It may read the store; a write from it is not part of the update.
    /// Setting an optional value to `nil` removes the key.
    /// - Returns: the value written.
    /// - Throws: what `body` throws (then nothing is written), or a ``ChronicleError``.
    @discardableResult
    public func update<Value>(_ key: Key<Value>, _ body: (inout Value) throws -> Void) throws -> Value {
        try updating(key, body)
    }

    /// The key changed between the read and the commit's turn (another local write).
    private struct ReadAgain: Error {}

    /// What the caller's closure threw, kept apart from the store's own errors.
    private struct BodyFailure: Error { var error: any Error }

    /// The read-modify-write behind `update`. The value is read and `body` runs outside every
    /// lock (it may read the store); then, under the lock that orders local writes, the commit
    /// is queued only if the key still shows what was read, and inside the write transaction it
    /// applies only if the key's entry is still that one: the committed entry's conflict order,
    /// or, when a queued local change was read, the entry that change committed (it commits
    /// first, in order; if it failed, or another writer's change landed in between, the entry is
    /// another). Otherwise it reads again.
    private func updating<K: ValueKey>(_ key: K, _ body: (inout K.Value) throws -> Void) throws -> K.Value {
        try AnyKey.validate(name: key.name)
        let eventLog = try eventLog
        for _ in 0..<1_000 {
            do {
                let read = try eventLog.visibleEntry(key.domain, key.name)
                var value = try decode(read?.entry, for: key, default: key.defaultValue)
                do { try body(&value) } catch { throw BodyFailure(error: error) }
                var change = try self.change(value, for: key)
                if let ticket = read?.ticket {
                    change.expectedTicket = ticket
                } else {
                    change.expectedOrder = .some(read?.entry.order)
                }
                let prepared = try prepared([change])
                defer { if let ticket = read?.ticket { eventLog.local.unwatch(ticket: ticket) } }
                _ = try eventLog.commitVisibly { entry in
                    let now = try entry(key.domain, key.name)
                    let unchanged =
                        switch (read?.ticket, now?.ticket) {
                        case let (before?, after?): before == after
                        case (nil, nil): read?.entry.order == now?.entry.order
                        default: false
                        }
                    guard unchanged else { throw ReadAgain() }
                    // Not settled yet (settling takes this lock): its commit records its order from now
                    // on; if it committed a moment ago, nothing is recorded and the update reads again.
                    if let ticket = read?.ticket { eventLog.local.watch(ticket: ticket) }
                    return prepared
                }
                return value
            } catch is StaleRead {
                continue  // another writer's change landed between the read and the commit: read again
            } catch is ReadAgain {
                continue
            } catch let failure as BodyFailure {
                throw failure.error
            } catch {
                throw ChronicleError.wrap(eventLog.mappedDiskError(error))
            }
        }
        throw ChronicleError.storeUnavailable(reason: "the key \(key.name) kept changing while it was updated; try again")
    }
}
