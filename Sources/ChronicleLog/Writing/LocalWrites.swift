package import ChronicleFormat
package import Synchronization

/// The state of this opening's own writes, owned in one place: the group committer, the
/// non-throwing forms' queue (visible to reads until each change's commit settles) with its
/// count, the tickets a read-then-write watches, the failures no flush has thrown yet, and the
/// writer's last counter. What needs only this state (a flush's wait, a read of a queued change,
/// a watched ticket, a failure) is its own method; `EventLog`'s writing files queue and commit
/// through it.
package final class LocalWrites: Sendable {
    /// The last counter used by the log's writer (only this opening writes with it; only the group-commit leader changes it).
    let writerCounter = Mutex<UInt64>(0)
    /// Batches every local commit (set once the log has opened; `nil` once it closed).
    package let committer: Mutex<GroupCommitter<[PendingChange], [CommittedEvent]>?> = Mutex(nil)
    /// Changes of the non-throwing forms, visible here until their commit settles.
    package let pending = Mutex(LocalWriteQueue())
    /// The greatest ticket of a queued change whose commit was published to observers (set before
    /// the publication): a queued change at or below it is committed, even if not settled yet.
    package let publishedTicket = Atomic<UInt64>(0)
    /// Queued changes a read-then-write read (by ticket), with the order each committed with once
    /// it has: see `PendingChange.expectedTicket`.
    let watchedTickets = Mutex<[UInt64: ConflictOrder?]>([:])
    let watchedCount = Atomic<Int>(0)
    /// How many queued changes are not yet settled: reads skip the pending lock when zero.
    package let pendingCount = Atomic<Int>(0)
    /// Failures of queued changes that no flush has thrown yet, and who listens for them.
    package let failures = Mutex(UnreportedWriteFailures())

    init() {}
    /// The last ticket handed out: a flush covers the changes queued up to it.
    package var lastTicket: UInt64 { pending.withLock { $0.lastTicket } }

    /// Waits until every change queued so far by the non-throwing forms is committed (durably,
    /// in the durable mode). Costs one atomic load when nothing is queued. Never call it on
    /// the committer's own path (inside a commit or a completion).
    package func settlePending() throws {
        guard pendingCount.load(ordering: .acquiring) > 0, let committer = committer.withLock({ $0 }) else { return }
        _ = try committer.wait(pending.withLock { _ in committer.enqueue([]) })
    }

    /// Calls `done` once every change queued so far by the non-throwing forms is committed,
    /// without blocking a thread (at once when nothing is queued).
    package func settlePending(then done: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        guard pendingCount.load(ordering: .acquiring) > 0, let committer = committer.withLock({ $0 }) else { return done(.success(())) }
        let leader = pending.withLock { _ in committer.enqueue([]) { result in done(result.map { _ in }) } }
        leader?.start()
    }

    /// The change to `name` queued and not yet committed, as a view entry (unsealed), if any.
    ///
    /// One atomic load when nothing is pending (the common read).
    package func pendingEntry(_ domain: Domain, _ name: String) -> ViewEntry? {
        guard pendingCount.load(ordering: .acquiring) > 0 else { return nil }
        guard let change = pending.withLock({ $0.entry(domain, name)?.change }) else { return nil }
        return ViewEntry(pending: change)
    }

    /// Records the order the queued change `ticket` commits with, for a read-then-write that read
    /// it; call under the lock that orders local writes while the change is still queued, and
    /// ``unwatch(ticket:)`` afterwards.
    package func watch(ticket: UInt64) {
        watchedTickets.withLock { watched in
            if watched.updateValue(nil, forKey: ticket) == nil { watchedCount.add(1, ordering: .releasing) }
        }
    }

    package func unwatch(ticket: UInt64) {
        watchedTickets.withLock { watched in
            if watched.removeValue(forKey: ticket) != nil { watchedCount.subtract(1, ordering: .releasing) }
        }
    }

    /// Records a failure of queued changes for the next flush and tells every listener.
    package func recordFailure(_ failure: WriteFailure, ticket: UInt64) {
        let listeners = failures.withLock { $0.record(failure, ticket: ticket) }
        for listener in listeners { listener.yield(failure) }
    }

    /// Removes every unreported failure of a change queued up to `ticket` and returns the first
    /// (the others were published to the write-failure streams and logged).
    package func takeFailure(through ticket: UInt64) -> WriteFailure? {
        failures.withLock { $0.take(through: ticket) }
    }

    /// A stream of every failure from now on.
    package func failureStream() -> AsyncStream<WriteFailure> {
        let (stream, continuation) = AsyncStream<WriteFailure>.makeStream(bufferingPolicy: .bufferingNewest(UnreportedWriteFailures.limit))
        let id = failures.withLock { $0.addListener(continuation) }
        continuation.onTermination = { [weak self] _ in self?.failures.withLock { $0.removeListener(id) } }
        return stream
    }
}
