import ChronicleFormat
import ChronicleLog
import Synchronization

extension Store {
    /// The key's current value, then its value after every change, whoever
    /// made it: this store, another `Store` on the same directory, a replicated
    /// import, or another process (noticed within about a second).
    ///
    /// Every observer of a key hears every change, in order; a change that
    /// leaves the value as it was is not repeated. Cancelling the iterating
    /// task ends the observation and releases its resources.
    ///
    /// ```swift
    /// for await theme in store.updates(of: .theme) {
    ///     apply(theme)
    /// }
    /// ```
    public func updates<Value>(of key: Key<Value>) -> AsyncStream<Value> {
        observe(key)
    }

    /// Several keys at once: their current values, then their values again after every change
    /// of any of them (whoever made it, as with ``updates(of:)-(Key<Value>)``).
    ///
    /// ```swift
    /// for await (theme, launches) in store.updates(of: .theme, .launches) {
    ///     render(theme, launches)
    /// }
    /// ```
    /// Each element holds every key's value as read after the change. Cancelling the iterating
    /// task ends the observation of every key.
    public func updates<each Value>(of keys: repeat Key<each Value>) -> AsyncStream<(repeat each Value)> {
        let (stream, continuation) = AsyncStream<(repeat each Value)>.makeStream()
        let (changed, signal) = AsyncStream<Void>.makeStream()
        var observers: [Task<Void, Never>] = []
        for key in repeat each keys {
            let updates = self.updates(of: key)
            observers.append(
                Task {
                    var first = true  // the current value: read below with the others
                    for await _ in updates {
                        if first { first = false } else { signal.yield() }
                    }
                })
        }
        let read: @Sendable () -> (repeat each Value) = { (repeat self[each keys]) }
        let driver = Task {
            continuation.yield(read())
            for await _ in changed { continuation.yield(read()) }
        }
        let tasks = observers
        continuation.onTermination = { _ in
            for observer in tasks { observer.cancel() }
            signal.finish()
            driver.cancel()
        }
        return stream
    }

    private func observe<K: ValueKey>(_ key: K) -> AsyncStream<K.Value> {
        let (stream, continuation) = AsyncStream<K.Value>.makeStream()
        guard let eventLog = try? eventLog else {
            continuation.yield(key.defaultValue)
            continuation.finish()
            return stream
        }
        // The channel's id is made once: the close finds the channel it joined, whatever a
        // second encoding of the key's default would give.
        let channelID = ChannelID(key)
        let (channel, id) = channels.subscribe(continuation, to: key, id: channelID, reader: self, eventLog: eventLog)
        continuation.onTermination = { [weak self] _ in
            guard channel.unsubscribe(id) else { return }
            self?.channels.closeIfIdle(channel, id: channelID, eventLog: eventLog)
        }
        eventLog.startPollingIfNeeded()
        return stream
    }
}

extension Store: ObservationReader {
    var observedLog: EventLog { get throws { try eventLog } }

    func observedValue<K: ValueKey>(_ entry: ViewEntry?, for key: K) throws -> K.Value {
        try decode(entry, for: key, default: key.defaultValue)
    }

    func reportObservationError<K: ValueKey>(_ error: any Error, key: K) {
        log(error, "observation", key)
    }
}
