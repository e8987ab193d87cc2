import Synchronization

/// Delivers committed events to subscribers, outside any lock.
final class ObserverHub: Sendable {
    /// What a subscriber hears.
    enum Change: Sendable {
        /// Events committed by this process.
        case events([CommittedEvent])
        /// The store changed in a way that is not a list of events (another
        /// process committed, or the views were rebuilt): re-read.
        case reset
    }

    typealias Handler = @Sendable (Change) -> Void

    private struct State: ~Copyable {
        var nextID = 0
        var handlers: [Int: Handler] = [:]
    }

    private let state = Mutex(State())

    /// Adds a handler; returns its id for ``remove(_:)``.
    func add(_ handler: @escaping Handler) -> Int {
        state.withLock { state in
            state.nextID += 1
            state.handlers[state.nextID] = handler
            return state.nextID
        }
    }

    func remove(_ id: Int) {
        _ = state.withLock { $0.handlers.removeValue(forKey: id) }
    }

    var isEmpty: Bool { state.withLock { $0.handlers.isEmpty } }

    func publish(_ events: [CommittedEvent]) { deliver(.events(events)) }

    func publishReset() { deliver(.reset) }

    private func deliver(_ change: Change) {
        let handlers = state.withLock { Array($0.handlers.values) }
        for handler in handlers { handler(change) }
    }
}
