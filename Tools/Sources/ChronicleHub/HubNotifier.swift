import Foundation
import Logging
import PostgresNIO
import Synchronization

/// Wakes a node's long-polls when any node appends to their tenant: one `LISTEN` connection per
/// node, on the channel every append notifies (PostgreSQL `NOTIFY` in the appending
/// transaction, delivered only if it commits).
final class HubNotifier: Sendable {
    private struct State {
        var generations: [Int64: UInt64] = [:]
        var waiters: [Int64: [UInt64: CheckedContinuation<Void, Never>]] = [:]
        var nextWaiter: UInt64 = 0
        /// Shutting down: no long-poll is held any more.
        var draining = false
    }

    private let state = Mutex(State())
    /// The most long-polls of one tenant held at once on a node.
    static let maxWaitingPerTenant = 128
    let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    /// How many appends to `tenant` this node heard of: read it before looking at the log, then
    /// ``wait(for:past:timeout:)`` returns at once if one was heard since.
    func generation(_ tenant: Int64) -> UInt64 {
        state.withLock { $0.generations[tenant, default: 0] }
    }

    /// Long-polls waiting now (for the metrics).
    var waiting: Int { state.withLock { $0.waiters.values.reduce(0) { $0 + $1.count } } }
    /// Told a tenant's count of held long-polls each time one starts waiting (for tests and
    /// diagnostics, which wait on it rather than poll it).
    let onWaiting = Mutex<(@Sendable (_ tenant: Int64, _ waiting: Int) -> Void)?>(nil)

    /// Wakes the long-polls of `tenant`.
    func notify(_ tenant: Int64) {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.generations[tenant, default: 0] &+= 1
            return Array(state.waiters.removeValue(forKey: tenant)?.values ?? [:].values)
        }
        for waiter in woken { waiter.resume() }
    }

    /// Wakes every long-poll (after the listening connection was lost: appends may have been missed).
    func notifyAll() {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            for tenant in state.generations.keys { state.generations[tenant, default: 0] &+= 1 }
            let all = state.waiters.values.flatMap(\.values)
            state.waiters.removeAll()
            return all
        }
        for waiter in woken { waiter.resume() }
    }

    /// Answers every held long-poll now and every later one at once (a graceful shutdown).
    func shutDown() {
        state.withLock { $0.draining = true }
        notifyAll()
    }

    /// Returns when an append to `tenant` is heard after `generation`, after `timeout`, when
    /// the task is cancelled or when the node shuts down, whichever comes first.
    func wait(for tenant: Int64, past generation: UInt64, timeout: Duration) async {
        // One tenant's devices hold at most this many requests on a node: past it a long-poll
        // answers at once (the client waits its interval), so one token cannot take every
        // connection the node serves and lock the other tenants out.
        guard state.withLock({ ($0.waiters[tenant]?.count ?? 0) < Self.maxWaitingPerTenant }) else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.signal(tenant, past: generation) }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }

    private func signal(_ tenant: Int64, past generation: UInt64) async {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter &+= 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let waiting = state.withLock { state -> Int? in
                    if state.draining || state.generations[tenant, default: 0] != generation || Task.isCancelled { return nil }
                    state.waiters[tenant, default: [:]][id] = continuation
                    return state.waiters[tenant]?.count
                }
                guard let waiting else { return continuation.resume() }
                onWaiting.withLock { $0 }?(tenant, waiting)
            }
        } onCancel: {
            let waiter = state.withLock { state in state.waiters[tenant]?.removeValue(forKey: id) }
            waiter?.resume()
        }
    }

    /// Listens on one pooled connection until cancelled, reconnecting by itself (PostgreSQL
    /// restarted, connection lost); every reconnect wakes every long-poll.
    func listen(_ database: HubDatabase) async {
        await database.untilRunning()
        while !Task.isCancelled {
            do {
                try await database.client.withConnection { connection in
                    try await connection.listen(on: HubDatabase.channel) { notifications in
                        self.notifyAll()
                        for try await notification in notifications {
                            if let tenant = Int64(notification.payload) { self.notify(tenant) }
                        }
                    }
                }
            } catch {
                // The pool stopping closes this connection, sometimes before this task hears
                // that it is cancelled: the node is stopping, not losing its database.
                if Task.isCancelled || database.isStopping { return }
                logger.warning("chronicle hub: lost the notification connection; reconnecting", metadata: ["error": "\(String(reflecting: error))"])
                notifyAll()
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
    }
}
