import Dispatch
import Synchronization

/// Group commit for synchronous callers on many threads.
///
/// Callers queue their request; one of them becomes the leader, takes every
/// queued request, runs them together (one transaction, one fsync), hands each
/// caller its own result, and passes leadership to the next waiting caller. A
/// caller returns only after the commit holding its request.
final class GroupCommitter<Request: Sendable, Output: Sendable>: Sendable {
    typealias Runner = @Sendable ([Request]) -> [Result<Output, any Error>]

    fileprivate enum TicketState: Sendable {
        case waiting
        case lead
        case done(Result<Output, any Error>)
    }

    fileprivate final class Ticket: Sendable {
        let request: Request
        let state = Mutex<TicketState>(.waiting)
        let wakeUp = DispatchSemaphore(value: 0)
        init(_ request: Request) { self.request = request }
    }

    private struct Queue: ~Copyable {
        var pending: [Ticket] = []
        var leading = false
    }

    private let queue = Mutex(Queue())
    private let maxGroup: Int
    private let run: Runner

    /// - Parameters:
    ///   - maxGroup: The most requests one group (one transaction) takes.
    ///   - run: Runs a group and returns one result per request, in order.
    init(maxGroup: Int = 1024, run: @escaping Runner) {
        self.maxGroup = maxGroup
        self.run = run
    }

    /// The number of requests waiting for a group (for tests and diagnostics).
    var queuedCount: Int { queue.withLock { $0.pending.count } }

    /// Runs `request` in the next group and returns its result.
    func submit(_ request: Request) throws -> Output {
        try wait(enqueue(request))
    }

    /// A place in the queue: requests run in the order they were enqueued.
    struct Place: Sendable {
        fileprivate let ticket: Ticket
        fileprivate let isLeader: Bool
    }

    /// Queues `request` without waiting (the caller, or anyone, waits for it with ``wait(_:)``);
    /// requests run in the order they were enqueued.
    func enqueue(_ request: Request) -> Place {
        let ticket = Ticket(request)
        let isLeader = queue.withLock { queue in
            queue.pending.append(ticket)
            if queue.leading { return false }
            queue.leading = true
            return true
        }
        return Place(ticket: ticket, isLeader: isLeader)
    }

    /// Waits until the group holding the queued request has run (leading it, when it is this
    /// request's turn to lead) and returns its result. Call once per place.
    func wait(_ place: Place) throws -> Output {
        let ticket = place.ticket
        if !place.isLeader {
            ticket.wakeUp.wait()
            switch ticket.state.withLock({ $0 }) {
            case let .done(result): return try result.get()
            case .lead, .waiting: break  // became the leader
            }
        }
        return try lead(ticket)
    }

    private func lead(_ own: Ticket) throws -> Output {
        let group = queue.withLock { queue in
            let count = min(queue.pending.count, maxGroup)
            let group = Array(queue.pending.prefix(count))
            queue.pending.removeFirst(count)
            return group
        }
        let results = run(group.map(\.request))
        var ownResult: Result<Output, any Error>?
        for (ticket, result) in zip(group, results) {
            if ticket === own {
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
        if let next {
            next.state.withLock { $0 = .lead }
            next.wakeUp.signal()
        }
        // The leader's ticket is always the first of its group: a new leader
        // finds the queue empty, and a handed-off leader is the queue's first.
        guard let ownResult else { throw ChronicleError.storeUnavailable(reason: "group commit lost a request") }
        return try ownResult.get()
    }
}
