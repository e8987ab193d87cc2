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

    /// The secret's current value, then its value after every change (decrypted).
    public func updates<Value>(of key: SecretKey<Value>) -> AsyncStream<Value> {
        observe(key)
    }

    private func observe<K: ValueKey>(_ key: K) -> AsyncStream<K.Value> {
        let (stream, continuation) = AsyncStream<K.Value>.makeStream()
        guard let eventLog = try? eventLog else {
            continuation.yield(key.defaultValue)
            continuation.finish()
            return stream
        }
        let observer = KeyObserver(store: self, key: key, continuation: continuation)
        observer.refresh()
        let names = Set([key.name] + key.formerNames)
        let domain = key.domain
        let id = eventLog.observers.add { change in
            switch change {
            case let .events(events):
                if events.contains(where: { $0.event.domain == domain && names.contains($0.event.key) }) { observer.refresh() }
            case .reset:
                observer.refresh()
            }
        }
        continuation.onTermination = { _ in eventLog.observers.remove(id) }
        eventLog.startPollingIfNeeded()
        return stream
    }
}

/// One observation of one key: re-reads it and yields the value when it differs from the last one yielded.
private final class KeyObserver<K: ValueKey>: Sendable {
    private let store: Store
    private let key: K
    private let continuation: AsyncStream<K.Value>.Continuation
    /// The identity of the last yielded state: `nil` before the first yield.
    private let last = Mutex<Fingerprint?>(nil)

    struct Fingerprint: Equatable {
        var present: Bool
        var encoding: UInt8
        var payload: [UInt8]
    }

    init(store: Store, key: K, continuation: AsyncStream<K.Value>.Continuation) {
        self.store = store
        self.key = key
        self.continuation = continuation
    }

    /// Reads the key and yields its value if it changed. Serialized per observer,
    /// so values are yielded in the order the store reached them.
    func refresh() {
        last.withLock { last in
            do {
                let value = try store.readValue(key, default: key.defaultValue)
                let fingerprint: Fingerprint
                if ValueCoder.isNil(value) {
                    fingerprint = Fingerprint(present: false, encoding: 0, payload: [])
                } else {
                    let (encoding, payload) = try ValueCoder.encode(value, key: key.name)
                    fingerprint = Fingerprint(present: true, encoding: encoding.rawValue, payload: payload)
                }
                guard fingerprint != last else { return }
                last = fingerprint
                continuation.yield(value)
            } catch {
                store.log(error, "observation", key)
            }
        }
    }
}
