import ChronicleFormat
import ChronicleLMDB
package import Synchronization

/// Notices commits of other processes on the store while observers exist, and tells them to
/// re-read (this opening's own commits reach observers from the commit itself).
///
/// It reads the environment's last transaction id (one read of the meta page) every
/// ``interval`` while at least one observer exists, and stops by itself when the last observer
/// goes away.
package final class CommitPoller: Sendable {
    /// How often the last transaction id is read while observers exist.
    package static let interval: Duration = .milliseconds(200)

    private let environment: Environment
    private let observers: ObserverHub
    /// The polling task while one runs.
    package let task = Mutex<Task<Void, Never>?>(nil)

    init(environment: Environment, observers: ObserverHub) {
        self.environment = environment
        self.observers = observers
    }

    deinit { task.withLock { $0?.cancel() } }

    /// Starts polling, if it is not running.
    package func startIfNeeded() {
        task.withLock { task in
            guard task == nil else { return }
            let start = environment.lastTransactionID
            task = Task.detached { [weak self] in
                var last = start
                for await _ in Ticks(interval: CommitPoller.interval) {
                    guard let self else { return }
                    if self.stopIfIdle() { return }
                    let current = self.environment.lastTransactionID
                    if current != last {
                        if self.environment.othersCommitted(after: last, through: current) { self.observers.publishReset() }
                        last = current
                    }
                }
            }
        }
    }

    /// Ends polling when no observer is left; returns `true` when it did.
    private func stopIfIdle() -> Bool {
        task.withLock { task in
            guard observers.isEmpty else { return false }
            task = nil
            return true
        }
    }
}

extension EventLog {
    /// Starts noticing other processes' commits while observers exist (see ``CommitPoller``).
    package func startPollingIfNeeded() { poller.startIfNeeded() }
}
