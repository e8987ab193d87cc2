import ChronicleFormat
import Dispatch
import Synchronization

/// Group commit for callers on many threads, blocking or not.
///
/// Callers queue their request; the first one queued while nobody leads becomes the leader,
/// takes every queued request (up to `maxGroup`), runs them together (one transaction, one
/// fsync), hands each caller its result and passes leadership on.
///
/// Two kinds of request share the queue, in one order:
/// - a *waited* request (``enqueue(_:)`` then ``wait(_:)``, or ``submit(_:)``): its own thread
///   blocks until its group has run, and leads when its turn comes;
/// - a *completed* request (``enqueue(_:completion:)``): nobody waits for it; its completion is
///   called by whoever leads its group, and when it is the one to lead, a leader runs for it on
///   the committer's own queue.
///
/// The rule that keeps it live: a thread only ever blocks on its own ticket, and only a waited
/// ticket's thread is handed leadership. No queue ever holds a blocked ticket wait that a later
/// item of the same queue must release (the non-throwing setters used to wait on a serial
/// queue, and two threads could put their waits there in the opposite order of their places).
package final class GroupCommitter<Request: Sendable, Output: Sendable>: Sendable {
    package typealias Runner = @Sendable ([Request]) -> [Result<Output, any Error>]
    package typealias Completion = @Sendable (Result<Output, any Error>) -> Void

    fileprivate enum TicketState: Sendable {
        case waiting
        case lead
        case done(Result<Output, any Error>)
    }

    fileprivate final class Ticket: Sendable {
        let request: Request
        /// Called with the result by the group's leader; `nil` when a thread waits on `wakeUp`.
        let completion: Completion?
        let state = Mutex<TicketState>(.waiting)
        let wakeUp = DispatchSemaphore(value: 0)

        init(_ request: Request, completion: Completion?) {
            self.request = request
            self.completion = completion
        }
    }

    private struct Queue: ~Copyable {
        var pending: [Ticket] = []
        var leading = false
        /// Waiting for the number of pending requests to meet a condition (``waitUntilQueued(_:)``).
        var watchers: [Watcher] = []

        /// The pending requests changed: wakes the watchers whose condition holds now.
        mutating func changed() {
            guard !watchers.isEmpty else { return }
            let count = pending.count
            watchers.removeAll { watcher in
                guard watcher.condition(count) else { return false }
                watcher.met.signal()
                return true
            }
        }
    }

    private struct Watcher: Sendable {
        let condition: @Sendable (Int) -> Bool
        let met: DispatchSemaphore
    }

    private let queue = Mutex(Queue())
    /// Groups run so far: how a waiter tells a committer that works through a backlog from one
    /// that stopped (the exit hook), without the environment's lock.
    private let groups = Atomic<Int>(0)
    private let maxGroup: Int
    private let run: Runner
    /// Where leaders run for completed requests: it only ever runs `lead`, which waits on no ticket.
    private let leaders = DispatchQueue(label: "chronicle.group-commit")

    /// - Parameters:
    ///   - maxGroup: The most requests one group (one transaction) takes.
    ///   - run: Runs a group and returns one result per request, in order.
    package init(maxGroup: Int = 1024, run: @escaping Runner) {
        self.maxGroup = maxGroup
        self.run = run
    }

    /// The number of groups this committer has run (each one transaction, whatever its outcome).
    package var groupsRun: Int { groups.load(ordering: .acquiring) }

    /// The number of requests waiting for a group (for tests and diagnostics).
    package var queuedCount: Int { queue.withLock { $0.pending.count } }

    /// Blocks until the number of requests waiting for a group meets `condition` (at once when it
    /// does already): what a test waits on instead of polling ``queuedCount``. Woken by the change
    /// itself, under the queue's lock, so no change is missed.
    package func waitUntilQueued(_ condition: @escaping @Sendable (Int) -> Bool) {
        let met = DispatchSemaphore(value: 0)
        let already = queue.withLock { queue -> Bool in
            if condition(queue.pending.count) { return true }
            queue.watchers.append(Watcher(condition: condition, met: met))
            return false
        }
        if !already { met.wait() }
    }

    /// Runs `request` in the next group and returns its result, blocking the calling thread.
    package func submit(_ request: Request) throws -> Output {
        try wait(enqueue(request))
    }

    /// A place in the queue: requests run in the order they were enqueued.
    package struct Place: Sendable {
        fileprivate let ticket: Ticket
        fileprivate let isLeader: Bool
    }

    /// Queues `request` for the calling thread to wait on with ``wait(_:)``; requests run in the
    /// order they were enqueued. Never blocks.
    package func enqueue(_ request: Request) -> Place {
        let ticket = Ticket(request, completion: nil)
        return Place(ticket: ticket, isLeader: append(ticket))
    }

    /// Queues `request` and returns at once; `completion` is called with its result, in queue
    /// order with every other request's, on the thread that leads its group. A completion must
    /// not wait for another request of this committer.
    /// - Returns: when the request is the one to lead, the leader to start (``Leader/start()``,
    ///   once, best after the caller released its own locks: the leader's thread may take them).
    package func enqueue(_ request: Request, completion: @escaping Completion) -> Leader? {
        let ticket = Ticket(request, completion: completion)
        return append(ticket) ? Leader(committer: self, ticket: ticket) : nil
    }

    /// A leader for a completed request, not started yet.
    package struct Leader: Sendable {
        fileprivate let committer: GroupCommitter
        fileprivate let ticket: Ticket

        /// Leads on the committer's queue, never on the caller's thread.
        package func start() {
            let (committer, ticket) = (committer, ticket)
            committer.leaders.async { _ = committer.lead(ticket) }
        }
    }

    /// Waits until the group holding the queued request has run (leading it, when it is this
    /// request's turn to lead) and returns its result. Call once per place, on the thread that
    /// made it.
    package func wait(_ place: Place) throws -> Output {
        let ticket = place.ticket
        if !place.isLeader {
            ticket.wakeUp.wait()
            switch ticket.state.withLock({ $0 }) {
            case let .done(result): return try result.get()
            case .lead, .waiting: break  // handed leadership
            }
        }
        guard let result = lead(ticket) else { throw ChronicleError.storeUnavailable(reason: "group commit lost a request") }
        return try result.get()
    }

    /// Appends `ticket`; returns whether it leads (nobody was leading).
    private func append(_ ticket: Ticket) -> Bool {
        queue.withLock { queue in
            queue.pending.append(ticket)
            queue.changed()
            if queue.leading { return false }
            queue.leading = true
            return true
        }
    }

    /// Runs groups from the queue's head, which is `own`, and returns `own`'s result.
    ///
    /// A waiting thread leads one group and then hands on: to the next waited ticket's thread,
    /// or, when the next ticket is a completed one, to a leader on the committer's queue (a
    /// caller's thread never works through other threads' backlog). A leader on the committer's
    /// queue goes on while completed tickets head the queue.
    private func lead(_ own: Ticket) -> Result<Output, any Error>? {
        var ownResult: Result<Output, any Error>?
        while true {
            let group = queue.withLock { queue in
                let count = min(queue.pending.count, maxGroup)
                let group = Array(queue.pending.prefix(count))
                queue.pending.removeFirst(count)
                queue.changed()
                return group
            }
            let results = run(group.map(\.request))
            groups.add(1, ordering: .releasing)
            // In queue order: a completion of an earlier request has run before a later waiter wakes.
            for (ticket, result) in zip(group, results) {
                if let completion = ticket.completion {
                    completion(result)
                } else if ticket === own {
                    ownResult = result
                } else {
                    ticket.state.withLock { $0 = .done(result) }
                    ticket.wakeUp.signal()
                }
            }
            let next = queue.withLock { queue -> Ticket? in
                if let first = queue.pending.first { return first }
                queue.leading = false
                return nil
            }
            guard let next else { return ownResult }
            if next.completion == nil {
                next.state.withLock { $0 = .lead }
                next.wakeUp.signal()
                return ownResult
            }
            if own.completion == nil {
                leaders.async { _ = self.lead(next) }
                return ownResult
            }
            // On the committer's queue: lead the next group too (`next` heads the queue).
        }
    }
}
