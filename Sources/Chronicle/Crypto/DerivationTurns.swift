import Foundation
import Synchronization

/// Argon2id runs for received key records, one at a time (each may take a core and up to 1 GiB),
/// taken in turns by source: when a run ends, the next goes to the source that has waited
/// longest since its last turn, so what one source queued (a carrier's pushes from one address,
/// a mailbox's files) delays another source's record by at most one run per other waiting
/// source, never by its whole queue. A record its genuine sender sends again waits behind one
/// run of each other source, whatever they queued.
///
/// Only callers that need a derivation take a turn: an import whose records need none (keys it
/// holds, or a KEK already derived for that salt and cost) never waits here.
final class DerivationTurns: Sendable {
    private struct State {
        var running = false
        /// The source of the turn running.
        var current: String?
        /// Sources with waiting callers, in turn order: a source served goes to the back.
        var order: [String] = []
        var waiting: [String: [DispatchSemaphore]] = [:]
        /// The last turns taken, by source (for tests and the bench).
        var served: [String] = []

        mutating func record(_ source: String) {
            served.append(source)
            if served.count > 256 { served.removeFirst(128) }
        }
    }

    private let state = Mutex(State())
    /// Called at the start of every turn, on the caller's thread (tests hold a turn at a gate).
    let gate = Mutex<(@Sendable (String) -> Void)?>(nil)
    /// Called when a caller is put in line to wait (tests wait on it rather than on time).
    let queued = Mutex<(@Sendable (String) -> Void)?>(nil)

    /// Runs `work` in `source`'s next turn: at once when nobody derives, else after the turns
    /// ahead of it in the rotation.
    func run<T>(source: String, _ work: () throws -> T) throws -> T {
        let waiter = state.withLock { state -> DispatchSemaphore? in
            guard state.running else {
                state.running = true
                state.current = source
                state.record(source)
                return nil
            }
            let semaphore = DispatchSemaphore(value: 0)
            if state.waiting[source] == nil { state.order.append(source) }
            state.waiting[source, default: []].append(semaphore)
            return semaphore
        }
        if let waiter {
            if let queued = queued.withLock({ $0 }) { queued(source) }
            waiter.wait()
        }
        defer { handOver() }
        if let gate = gate.withLock({ $0 }) { gate(source) }
        return try work()
    }

    /// Ends a turn: the source at the front of the rotation runs next (passing over the source
    /// that just ran while another waits), and goes to the back while it has more callers waiting.
    private func handOver() {
        let next = state.withLock { state -> DispatchSemaphore? in
            guard !state.order.isEmpty else {
                state.running = false
                state.current = nil
                return nil
            }
            let index = state.order.firstIndex { $0 != state.current } ?? 0
            let source = state.order.remove(at: index)
            var queue = state.waiting[source] ?? []
            guard !queue.isEmpty else {  // never: a source is in the rotation while it has callers waiting
                state.running = false
                state.current = nil
                return nil
            }
            let semaphore = queue.removeFirst()
            if queue.isEmpty {
                state.waiting[source] = nil
            } else {
                state.waiting[source] = queue
                state.order.append(source)
            }
            state.current = source
            state.record(source)
            return semaphore  // `running` stays set: the turn passes straight to it
        }
        next?.signal()
    }

    /// How many callers wait for a turn.
    var waitingCount: Int { state.withLock { $0.waiting.values.reduce(0) { $0 + $1.count } } }

    /// The sources of the turns taken so far, in order.
    var servedSources: [String] { state.withLock { $0.served } }
}
