package import ChronicleFormat
import ChronicleLMDB
import ChronicleSodium
import Dispatch
import Foundation
import Logging
import Synchronization

/// A key's entry as the next local commit finds it: a queued local change of it (`ticket`: its
/// place among local writes), else the committed view's entry (`ticket` nil).
package struct VisibleEntry {
    package var entry: ViewEntry
    package var ticket: UInt64?

    package init(entry: ViewEntry, ticket: UInt64?) {
        self.entry = entry
        self.ticket = ticket
    }
}

extension EventLog {
    /// Queues `changes` for a commit moments from now and returns at once; reads and observers
    /// of this process see them from now on. When the commit fails, the values revert
    /// (observers hear the stored value again), the failure is published to the store's write
    /// failures and the next ``flush()`` throws it.
    package func enqueue(_ changes: [PendingChange]) throws {
        guard let committer = local.committer.withLock({ $0 }) else { throw ChronicleError.storeUnavailable(reason: "store closed") }
        if LocalWriteQueue.mustWait(unsettled: local.pendingCount.load(ordering: .relaxed)) {
            // Back pressure: a thread only ever waits on its own ticket.
            do { _ = try commitVisibly(changes) } catch {
                let failure = ChronicleError.wrap(mappedDiskError(error))
                logger.error(
                    "chronicle: a change made with a non-throwing setter could not be committed and is dropped",
                    metadata: ["error": "\(failure)", "store": "\(path)", "keys": "\(changes.map(\.key))"])
                local.recordFailure(WriteFailure(keys: changes.map(\.key), error: failure), ticket: local.lastTicket)
            }
            return
        }
        // The completion holds the log: what is queued is committed even when every store on it
        // is released meanwhile (the registry hands a reopen this same log while it lives).
        let queued = try queueVisibly(committer, { _ in changes }) { tickets in
            { result in
                switch result {
                case .success: self.settle(changes, tickets, failure: nil)
                case let .failure(error): self.settle(changes, tickets, failure: ChronicleError.wrap(self.mappedDiskError(error)), report: true)
                }
            }
        }
        queued?.leader?.start()  // outside the lock that orders local writes
    }

    /// Commits `changes` and returns once they are committed (durably, in the durable mode),
    /// blocking the calling thread; reads and observers of this process see them from the call
    /// on, in the order of every local write, whatever its form. When the commit fails, they
    /// revert (observers hear the stored value again) and the error is thrown.
    package func commitVisibly(_ changes: [PendingChange]) throws -> [CommittedEvent] {
        try commitVisibly(building: { _ in changes }) ?? []
    }

    /// Commits the changes `build` makes of the keys' entries as the commit will find them
    /// (read-then-write: a rename), blocking like ``commitVisibly(_:)``. `build` runs under the
    /// lock that orders local writes, so no local write lands between its reads and the commit;
    /// changes of others (imports, other processes) are caught by the changes' expected orders.
    /// - Returns: `nil` when `build` made no change.
    package func commitVisibly(building build: (_ entry: (Domain, String) throws -> VisibleEntry?) throws -> [PendingChange]) throws -> [CommittedEvent]? {
        guard let committer = local.committer.withLock({ $0 }) else { throw ChronicleError.storeUnavailable(reason: "store closed") }
        guard let (place, tickets, changes, _) = try queueVisibly(committer, build, completion: nil), let place else { return nil }
        do {
            let committed = try committer.wait(place)
            settle(changes, tickets, failure: nil)
            return committed
        } catch {
            settle(changes, tickets, failure: ChronicleError.wrap(mappedDiskError(error)), report: false)  // the caller hears it
            throw error
        }
    }

    /// Makes the changes `build` returns visible to reads and observers and takes their place in
    /// the commit queue, under one lock: commits, reads and observers all see local writes in the
    /// order of the calls. `nil` when `build` returns no change.
    /// - Parameter completion: makes, from the changes' tickets, what the committer calls with
    ///   their result (nobody waits: the place returned is `nil`); `nil` for a caller that waits.
    private func queueVisibly(
        _ committer: GroupCommitter<[PendingChange], [CommittedEvent]>,
        _ build: (_ entry: (Domain, String) throws -> VisibleEntry?) throws -> [PendingChange],
        completion: (([UInt64]) -> GroupCommitter<[PendingChange], [CommittedEvent]>.Completion)?
    ) throws -> (place: GroupCommitter<[PendingChange], [CommittedEvent]>.Place?, tickets: [UInt64], changes: [PendingChange],
        leader: GroupCommitter<[PendingChange], [CommittedEvent]>.Leader?)? {
        try local.pending.withLock { pending in
            let queuedEntries = pending.entries  // (a copy-on-write handle: the closure cannot hold `pending`)
            let lookup = { (domain: Domain, name: String) throws -> VisibleEntry? in
                if let queued = queuedEntries[LocalWriteQueue.Key(domain: domain, name: name)] {
                    return VisibleEntry(entry: ViewEntry(pending: queued.change), ticket: queued.ticket)
                }
                return try self.committedEntry(domain, name).map { VisibleEntry(entry: $0, ticket: nil) }
            }
            let changes = try build(lookup)
            guard !changes.isEmpty else { return nil }
            let admission = pending.admit(changes)
            local.pendingCount.add(changes.count, ordering: .releasing)
            // Publishing only queues the change for the hub's serial queue; no observer runs under this lock.
            observers.publishPending(admission.visible)
            if let completion {
                return (nil, admission.tickets, changes, committer.enqueue(admission.queued, completion: completion(admission.tickets)))
            }
            return (committer.enqueue(admission.queued), admission.tickets, changes, nil)
        }
    }

    /// Makes every change made so far by this process durable: commits what the non-throwing
    /// forms queued, then (in the `.noMetaSync` and `.noSync` modes) flushes the file.
    /// - Throws: the first failure of a write queued before the call that no flush reported yet.
    package func flush() throws {
        let through = local.lastTicket
        do {
            try local.settlePending()
            try flushFile()
        } catch {
            // The queued writes' own failure, when one was recorded, says more than this one.
            throw local.takeFailure(through: through)?.error ?? error
        }
        if let failure = local.takeFailure(through: through) { throw failure.error }
    }

    /// Writes the data file back to the disk in the `.noMetaSync` and `.noSync` modes (every
    /// commit already did in the durable mode).
    package func flushFile() throws {
        if !environment.syncsEveryCommit { try environment.flush() }
    }

    /// Forgets the pending entries of committed (or failed) changes, unless a later change of the
    /// same key replaced them. On `failure` the values revert (observers hear the stored value
    /// again); with `report` (nobody waited for the change) it is logged, recorded for the next
    /// flush and published to the store's write failures.
    private func settle(_ changes: [PendingChange], _ tickets: [UInt64], failure: ChronicleError?, report: Bool = false) {
        var forgotten = local.pending.withLock { $0.settle(changes, tickets: tickets) }
        // The visible copies of sealed plaintexts (a reader that took one a moment ago keeps its own).
        for index in forgotten.indices { Sodium.wipe(&forgotten[index].payload) }
        if failure != nil { observers.publishReset() }
        if let failure, report {
            logger.error(
                "chronicle: a change made with a non-throwing setter could not be committed and is dropped",
                metadata: ["error": "\(failure)", "store": "\(path)", "keys": "\(changes.map(\.key))"])
            local.recordFailure(WriteFailure(keys: changes.map(\.key), error: failure), ticket: tickets.last ?? local.lastTicket)
        }
        // Last: a settle that sees the count reach zero finds the failure recorded.
        local.pendingCount.subtract(changes.count, ordering: .releasing)
    }

    /// The key's entry as this process reads it: a queued local change (with its ticket), else
    /// the committed view entry.
    package func visibleEntry(_ domain: Domain, _ name: String) throws -> VisibleEntry? {
        if local.pendingCount.load(ordering: .acquiring) > 0,
            let queued = local.pending.withLock({ $0.entry(domain, name) })
        {
            return VisibleEntry(entry: ViewEntry(pending: queued.change), ticket: queued.ticket)
        }
        return try committedEntry(domain, name).map { VisibleEntry(entry: $0, ticket: nil) }
    }
}
