import ChronicleFormat
import Synchronization

extension EventLog {
    /// How often the environment's last transaction id is read while observers exist.
    package static let pollInterval: Duration = .milliseconds(200)

    /// Starts the poller that notices commits of other processes, if it is not running.
    ///
    /// It reads the last transaction id (one read of the meta page) every
    /// ``pollInterval`` while at least one observer exists, reports a change only
    /// when a transaction it sees was committed elsewhere (this opening's own
    /// commits reach observers from the commit itself), and stops by itself when
    /// the last observer goes away.
    package func startPollingIfNeeded() {
        poller.withLock { poller in
            guard poller == nil else { return }
            let start = lastTransactionID
            poller = Task.detached { [weak self] in
                var last = start
                for await _ in Ticks(interval: EventLog.pollInterval) {
                    guard let self else { return }
                    if self.stopPollingIfIdle() { return }
                    let current = self.lastTransactionID
                    if current != last {
                        // This process's own commits reached its observers already, from the commit itself.
                        if self.othersCommitted(after: last, through: current) { self.observers.publishReset() }
                        last = current
                    }
                }
            }
        }
    }

    /// Ends the poller when no observer is left; returns `true` when it did.
    private func stopPollingIfIdle() -> Bool {
        poller.withLock { poller in
            guard observers.isEmpty else { return false }
            poller = nil
            return true
        }
    }
}
