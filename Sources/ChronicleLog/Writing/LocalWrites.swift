import ChronicleFormat
package import Synchronization

/// The state of this opening's own writes, owned in one place: the group committer, the
/// non-throwing forms' queue (visible to reads until each change's commit settles) with its
/// count, the tickets a read-then-write watches, the failures no flush has thrown yet, and the
/// writer's last counter. `EventLog`'s writing files act on it; nothing else holds these.
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
}
