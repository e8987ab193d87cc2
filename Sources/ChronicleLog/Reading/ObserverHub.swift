import ChronicleFormat
import Dispatch
import Synchronization

/// Delivers committed events to subscribers, outside any lock and off the commit path.
///
/// A commit hands its events to ``publish(_:)``, which only queues them: the
/// subscribers' work (re-reading a key, waking an automatic push) runs on the
/// hub's own serial queue, in commit order, after the writers of that commit
/// have been released. So a durable `set` costs the same with a hundred live
/// observers as with none, and a slow observer never holds up a writer.
package final class ObserverHub: Sendable {
    /// What a subscriber hears.
    package enum Change: Sendable {
        /// Events committed by this process.
        case events([CommittedEvent])
        /// The store changed in a way that is not a list of events (another
        /// process committed, or the views were rebuilt): re-read.
        case reset
        /// Changes of the non-throwing forms, visible now and committed moments later
        /// (their commit arrives as `events` afterwards).
        case pending([PendingChange])
    }

    package typealias Handler = @Sendable (Change) -> Void

    private struct State: ~Copyable {
        var nextID = 0
        var handlers: [Int: Handler] = [:]
    }

    private let state = Mutex(State())
    /// One serial queue per hub: changes reach every subscriber in commit order.
    private let delivery = DispatchQueue(label: "chronicle.observers", qos: .userInitiated)

    /// Adds a handler; returns its id for ``remove(_:)``.
    package func add(_ handler: @escaping Handler) -> Int {
        state.withLock { state in
            state.nextID += 1
            state.handlers[state.nextID] = handler
            return state.nextID
        }
    }

    package func remove(_ id: Int) {
        _ = state.withLock { $0.handlers.removeValue(forKey: id) }
    }

    package var isEmpty: Bool { state.withLock { $0.handlers.isEmpty } }

    package func publish(_ events: [CommittedEvent]) { deliver(.events(events)) }

    package func publishReset() { deliver(.reset) }

    package func publishPending(_ changes: [PendingChange]) { deliver(.pending(changes)) }

    /// Queues `change` for the subscribers present now; costs one lock when there are none.
    private func deliver(_ change: Change) {
        let handlers = state.withLock { Array($0.handlers.values) }
        guard !handlers.isEmpty else { return }
        delivery.async {
            for handler in handlers { handler(change) }
        }
    }
}
