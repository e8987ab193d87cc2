import ChronicleFormat
import Synchronization

/// A tenant's appends on this node, in arrival order: one push at a time has the turn, and
/// commits the others waiting (no connection held while they wait).
///
/// The shape of the log's `GroupCommitter` (the first in leads, takes whoever waits, bounded by
/// count and bytes, commits once and answers each), but not that type, for two reasons: the
/// log's committer blocks threads (a waiter sleeps on a semaphore while a synchronous LMDB
/// transaction runs), where a node's pushes are async requests on NIO's event loops that must
/// never block one; and it keeps one queue per store, where a node keeps one per tenant, so a
/// tenant's turn never waits behind another tenant's. The hub also may not import the log
/// (scripts/check-layers.sh).
final class AppendQueue: Sendable {
    /// One push: the body as received, decoded in its turn.
    struct Push: Sendable {
        var body: [UInt8]
        var device: HubDevice
        /// The filter the range was exported with, when the pusher said (its push mark's).
        var filter: RangeFilter? = nil
    }

    /// What a waiting push is told: take the turn, or here is your result.
    enum Turn: Sendable {
        case lead
        case done(Result<RangeReceipt, any Error>)
    }

    struct Waiting: Sendable {
        var push: Push
        var continuation: CheckedContinuation<Turn, Never>
    }

    /// A tenant's turn on this node: the pushes waiting behind it, and how many pushes the
    /// turn holds (the one whose turn it is and those it took to commit with its own).
    private struct TenantTurn {
        var waiting: [Waiting] = []
        var inTurn = 1
    }

    /// Per tenant with a push in its turn.
    private let state = Mutex<[Int64: TenantTurn]>([:])
    /// Told a tenant's ``held(_:)`` count after each push joins the queue (for tests and
    /// diagnostics, which wait on it rather than poll it).
    let onHeld = Mutex<(@Sendable (_ tenant: Int64, _ held: Int) -> Void)?>(nil)

    /// Waits for `push`'s turn (at once when its tenant has none in progress on this node), or
    /// for the result another push's turn gave it.
    func enqueue(_ push: Push) async -> Turn {
        await withCheckedContinuation { (continuation: CheckedContinuation<Turn, Never>) in
            let tenant = push.device.tenant
            let (lead, held) = state.withLock { state -> (Bool, Int) in
                guard var turn = state[tenant] else {
                    state[tenant] = TenantTurn()
                    return (true, 1)
                }
                turn.waiting.append(Waiting(push: push, continuation: continuation))
                state[tenant] = turn
                return (false, turn.inTurn + turn.waiting.count)
            }
            onHeld.withLock { $0 }?(tenant, held)
            if lead { continuation.resume(returning: .lead) }
        }
    }

    /// Removes the oldest waiting pushes of `tenant`, at most `count` of them and about
    /// `budget` body bytes, for the push in its turn to commit with its own.
    func take(_ tenant: Int64, budget: Int, count: Int) -> [Waiting] {
        state.withLock { state in
            guard var turn = state[tenant] else { return [] }
            var taken = 0
            var bytes = 0
            while taken < min(count, turn.waiting.count), bytes + turn.waiting[taken].push.body.count <= budget {
                bytes += turn.waiting[taken].push.body.count
                taken += 1
            }
            let batch = Array(turn.waiting.prefix(taken))
            turn.waiting.removeFirst(taken)
            turn.inTurn += taken
            state[tenant] = turn
            return batch
        }
    }

    /// Ends the turn on `tenant`: the oldest waiting push takes it, or the tenant has none.
    func finish(_ tenant: Int64) {
        let next = state.withLock { state -> Waiting? in
            guard var turn = state[tenant], !turn.waiting.isEmpty else {
                state[tenant] = nil
                return nil
            }
            let first = turn.waiting.removeFirst()
            turn.inTurn = 1
            state[tenant] = turn
            return first
        }
        next?.continuation.resume(returning: .lead)
    }

    /// How many appends of `tenant` this node holds: in a turn, or waiting for one (for tests
    /// and diagnostics: a turn counts what it took only for this).
    func held(_ tenant: Int64) -> Int {
        state.withLock { state in state[tenant].map { $0.inTurn + $0.waiting.count } ?? 0 }
    }
}

