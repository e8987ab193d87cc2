public import NIOCore
import Synchronization

/// A value that code under test changes, and waits that resume as soon as it satisfies their
/// condition: what a test waits for (a port bound, a push answered) without polling.
public final class Watched<Value: Sendable>: Sendable {
    private struct Waiter: Sendable {
        let id: UInt64
        let holds: @Sendable (Value) -> Bool
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct State: Sendable {
        var value: Value
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
        /// Waits whose guard fired before they were queued: they end at once when they are.
        var expired: Set<UInt64> = []
    }

    private let state: Mutex<State>

    public init(_ value: Value) { state = Mutex(State(value: value)) }

    /// The value now.
    public var value: Value { state.withLock { $0.value } }

    /// Changes the value and resumes the waits whose condition now holds.
    public func update(_ change: (inout Value) -> Void) {
        let due = state.withLock { state -> [Waiter] in
            change(&state.value)
            let value = state.value
            let due = state.waiters.filter { $0.holds(value) }
            state.waiters.removeAll { $0.holds(value) }
            return due
        }
        for waiter in due { waiter.continuation.resume(returning: true) }
    }

    /// Waits until `condition` holds of the value; false only when `limit` passes first (a hang
    /// guard: generous, never a measure of speed).
    public func wait(until condition: @escaping @Sendable (Value) -> Bool, within limit: Duration = hangGuard) async -> Bool {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        let guardTask = Task { [self] in
            try? await Task.sleep(for: limit)
            if !Task.isCancelled { giveUp(id) }
        }
        defer { guardTask.cancel() }
        return await withCheckedContinuation { continuation in
            let answer = state.withLock { state -> Bool? in
                if condition(state.value) { return true }
                if state.expired.remove(id) != nil { return false }
                state.waiters.append(Waiter(id: id, holds: condition, continuation: continuation))
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    private func giveUp(_ id: UInt64) {
        let waiter = state.withLock { state -> Waiter? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                state.expired.insert(id)  // not queued yet (or already resumed: then never queued again)
                return nil
            }
            return state.waiters.remove(at: index)
        }
        waiter?.continuation.resume(returning: false)
    }
}

/// How long a test waits for something before it calls it a hang: ten minutes, for every wait,
/// so only a thing that never happens fails (as the core suite's `hangGuard`). Not a
/// measurement: three suites run at once on two cores wait far longer than one does.
public let hangGuard: Duration = .seconds(600)

/// `hangGuard` as an HTTP client's request timeout.
public let requestHangGuard: TimeAmount = .seconds(hangGuard.components.seconds)

/// Whether `body` finishes without throwing within `limit`: a hang guard that tells a hang from
/// slowness.
public func finishes(within limit: Duration = hangGuard, _ body: @escaping @Sendable () async throws -> Void) async -> Bool {
    await withTaskGroup(of: Bool.self) { group in
        group.addTask { (try? await body()) != nil }
        group.addTask { try? await Task.sleep(for: limit); return false }
        let first = await group.next() ?? false
        group.cancelAll()
        return first
    }
}
