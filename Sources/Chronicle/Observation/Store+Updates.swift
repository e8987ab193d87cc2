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
        let (channel, id) = subscribe(continuation, to: key, id: channelID, eventLog: eventLog)
        continuation.onTermination = { [weak self] _ in
            guard channel.unsubscribe(id) else { return }
            self?.closeChannelIfIdle(channel, id: channelID, eventLog: eventLog)
        }
        eventLog.startPollingIfNeeded()
        return stream
    }

    /// Subscribes `continuation` to the channel of `key` for values of its type, opening the
    /// channel (and its handler in the log's observer hub) on first use. One lock covers finding
    /// the channel and joining it, so a channel never closes between the two.
    private func subscribe<K: ValueKey>(
        _ continuation: KeyChannel<K>.Continuation, to key: K, id: ChannelID, eventLog: EventLog
    ) -> (KeyChannel<K>, Int) {
        channels.withLock { channels in
            if let open = channels[id], let channel = open.channel as? KeyChannel<K> { return (channel, channel.subscribe(continuation)) }
            let channel = KeyChannel(store: self, key: key)
            let formerNames = Set(key.formerNames.map(KeyName.init))
            let domain = key.domain
            let handler = eventLog.observers.add { change in
                switch change {
                case let .events(events):
                    if !formerNames.isEmpty, events.contains(where: { $0.event.domain == domain && formerNames.contains(KeyName($0.event.key)) }) {
                        channel.refresh()  // a change under a former name: re-read through the fallback
                    } else {
                        channel.deliver(events)
                    }
                case .reset:
                    channel.refresh()
                case let .pending(changes):
                    if let change = changes.last(where: { $0.domain == domain && KeyName($0.key) == channel.name }) { channel.deliver(pending: change) }
                }
            }
            channels[id] = OpenChannel(channel: channel, handler: handler)
            return (channel, channel.subscribe(continuation))
        }
    }

    /// Closes `channel`, opened under `id`, when its last subscriber has gone.
    private func closeChannelIfIdle<K: ValueKey>(_ channel: KeyChannel<K>, id: ChannelID, eventLog: EventLog) {
        channels.withLock { channels in
            guard let open = channels[id], (open.channel as? KeyChannel<K>) === channel, channel.isIdle else { return }
            channels[id] = nil
            eventLog.observers.remove(open.handler)
        }
    }
}

/// Which channel an observation joins: one per key name, domain, value type, default and former
/// names. A channel reads and decodes for the key that opened it, so two keys of one name that
/// read differently (another default, other former names) each get their own.
struct ChannelID: Hashable, Sendable {
    var domain: Domain
    /// By its bytes, as the store keeps names: two canonically equivalent spellings are two keys.
    var name: KeyName
    var valueType: ObjectIdentifier
    /// The default's encoding and bytes (empty for `nil`; `nil` when it cannot be encoded). Two
    /// equal defaults whose encoding varies (a `Set` from two instances) get two channels: each
    /// still right, only not shared.
    var defaultValue: [UInt8]?
    var formerNames: [KeyName]

    init<K: ValueKey>(_ key: K) {
        domain = key.domain
        name = KeyName(key.name)
        valueType = ObjectIdentifier(K.Value.self)
        defaultValue =
            ValueCoder.isNil(key.defaultValue)
            ? [] : (try? ValueCoder.encode(key.defaultValue, key: key.name)).map { [$0.0.rawValue] + $0.1 }
        formerNames = key.formerNames.map(KeyName.init)
    }
}

/// A channel and its handler in the log's observer hub.
struct OpenChannel: Sendable {
    let channel: any Sendable
    let handler: Int
}
