import ChronicleFormat
import ChronicleLog
import Synchronization

/// The observations of one key through one store, for one value type: the key is
/// read once per change and the value handed to every subscriber.
///
/// A hundred `updates(of:)` streams of one key cost one decode and one comparison
/// per change, not a hundred; each stream still gets the current value first,
/// then every change in order, never an unchanged value twice in a row.
///
/// Changes committed by this process arrive as events, in commit order, and each
/// winning event's own value is handed out: no change is skipped however fast the
/// writers are. Changes of other processes (and rebuilt views) arrive as a reset,
/// and the key is re-read.
final class KeyChannel<K: ValueKey>: Sendable {
    typealias Continuation = AsyncStream<K.Value>.Continuation

    /// The identity of a key's state, to tell a change from a repeat.
    struct Fingerprint: Equatable {
        var present: Bool
        var encoding: UInt8
        var payload: [UInt8]
    }

    private struct State: ~Copyable {
        var nextID = 0
        var subscribers: [Int: Continuation] = [:]
        /// The state last handed to the subscribers: `nil` before the first read.
        var last: Fingerprint?
        /// The value last handed out, to compare `Equatable` values as values (a `Set` encodes
        /// its elements in varying order, so equal sets can have different fingerprints).
        var lastValue: K.Value?
        /// The conflict order of the committed entry last read or handed out: an event is news
        /// only when it is later in that order. Not the local sequence, which compaction renumbers
        /// and which a promoted (held back, now due) event keeps from its arrival.
        var lastOrder: ConflictOrder?
        /// The ticket of the last non-throwing change handed out before its commit: the commits
        /// of it and of earlier ones are not news (their values went out already).
        var lastTicket: UInt64 = 0
        /// The greatest ticket among this key's committed events: below `lastTicket`, a local
        /// change is visible and not yet committed.
        var lastCommittedTicket: UInt64 = 0

        /// Records that the local change `ticket`, read as queued (its commit not published
        /// yet), is visible and not committed, whatever this channel heard of it before.
        mutating func markOutstanding(_ ticket: UInt64) {
            guard ticket > 0 else { return }  // tickets start at 1; 0 is no change
            lastTicket = max(lastTicket, ticket)
            lastCommittedTicket = min(lastCommittedTicket, ticket - 1)
        }
    }

    private let reader: any ObservationReader
    private let key: K
    private let state = Mutex(State())

    init(reader: any ObservationReader, key: K) {
        self.reader = reader
        self.key = key
        name = KeyName(key.name)
    }

    /// Adds a subscriber and yields it the key's current value; returns its id.
    func subscribe(_ continuation: Continuation) -> Int {
        state.withLock { state in
            // What this read sees is visible now: no local change is outstanding for it (a
            // ticket heard while nobody listened must not hold back later replicated events).
            state.lastCommittedTicket = state.lastTicket
            if let (value, fingerprint, order, ticket) = read() {
                state.last = fingerprint
                state.lastValue = value  // a re-read that encodes the same value differently is no news
                if case let .some(order) = order { state.lastOrder = order }
                // A queued local change read here is outstanding, whether this channel heard it
                // (the hub may hand it over between the channel's opening and this read) or not
                // (queued before it opened): what commits under it is not news.
                if let ticket { state.markOutstanding(ticket) }
                continuation.yield(value)
            } else {
                continuation.yield(key.defaultValue)
            }
            state.nextID += 1
            state.subscribers[state.nextID] = continuation
            return state.nextID
        }
    }

    /// Removes a subscriber; returns `true` when none is left.
    func unsubscribe(_ id: Int) -> Bool {
        state.withLock { state in
            state.subscribers[id] = nil
            return state.subscribers.isEmpty
        }
    }

    /// `true` when no subscriber is left.
    var isIdle: Bool { state.withLock { $0.subscribers.isEmpty } }

    /// Reads the key and hands its value to every subscriber if it changed.
    /// Serialized by the channel's lock, so values go out in the order the store reached them.
    func refresh() {
        let handOut = state.withLock { state -> [(K.Value, [Continuation])] in
            guard !state.subscribers.isEmpty, let (value, fingerprint, order, ticket) = read() else { return [] }
            // Assigned, not raised: after a restore the stored entry may be earlier than the last.
            if case let .some(order) = order { state.lastOrder = order }
            state.lastCommittedTicket = state.lastTicket  // a re-read sees what is visible now
            if let ticket { state.markOutstanding(ticket) }  // still queued: not committed
            return hand(value, fingerprint, &state)
        }
        yield(handOut)
    }

    /// Hands out the value of every event of `events` that became the key's current entry,
    /// in commit order, skipping what subscribers already have.
    func deliver(_ events: [CommittedEvent]) {
        let handOut = state.withLock { state -> [(K.Value, [Continuation])] in
            guard !state.subscribers.isEmpty else { return [] }
            var handOut: [(K.Value, [Continuation])] = []
            for committed in events
            where committed.isWinner && committed.event.domain == key.domain && KeyName(committed.event.key) == name
                && state.lastOrder.map({ committed.event.order > $0 }) ?? true
            {
                state.lastOrder = committed.event.order
                if committed.ticket != 0 {
                    state.lastCommittedTicket = max(state.lastCommittedTicket, committed.ticket)
                    if committed.ticket < state.lastTicket { continue }  // shown before its commit
                } else if state.lastCommittedTicket < state.lastTicket {
                    // Another writer's event (an import) under a local change that is visible and
                    // commits after it, later on the clock: reads never show it, nor do observers.
                    continue
                }
                guard let (value, fingerprint) = decode(ViewEntry(event: committed.event, sequence: committed.sequence)) else { continue }
                handOut += hand(value, fingerprint, &state)
            }
            return handOut
        }
        yield(handOut)
    }

    /// The key's name, compared by its bytes (another spelling's changes are another key's).
    let name: KeyName

    /// Hands out the value of a change made with a non-throwing form: visible now, committed
    /// moments later (its commit then hands out nothing new).
    func deliver(pending change: PendingChange) {
        let handOut = state.withLock { state -> [(K.Value, [Continuation])] in
            state.lastTicket = max(state.lastTicket, change.ticket)
            guard !state.subscribers.isEmpty, let (value, fingerprint) = decode(ViewEntry(pending: change)) else { return [] }
            return hand(value, fingerprint, &state)
        }
        yield(handOut)
    }

    /// Records `value` as handed out when it differs from the last; returns it with its recipients.
    private func hand(_ value: K.Value, _ fingerprint: Fingerprint, _ state: inout State) -> [(K.Value, [Continuation])] {
        guard fingerprint != state.last else { return [] }
        state.last = fingerprint
        defer { state.lastValue = value }
        if let lastValue = state.lastValue, Self.equal(value, lastValue) { return [] }
        return [(value, Array(state.subscribers.values))]
    }

    /// Whether two values are equal as values, when their type is `Equatable` (else `false`:
    /// their fingerprints decided).
    private static func equal(_ a: K.Value, _ b: K.Value) -> Bool {
        func same<T: Equatable>(_ a: T, _ b: Any) -> Bool { (b as? T) == a }
        guard let a = a as? any Equatable else { return false }
        return same(a, b)
    }

    /// Yields outside the channel's lock: resuming a waiting consumer takes its task's lock, and a
    /// consumer's cancellation holds that lock while it unsubscribes (which takes the channel's).
    /// Refreshes and deliveries all run on the observer hub's serial queue, so values still go
    /// out in order.
    private func yield(_ handOut: [(K.Value, [Continuation])]) {
        for (value, continuations) in handOut {
            for continuation in continuations { continuation.yield(value) }
        }
    }

    /// The key's current value, its fingerprint and the conflict order of its committed entry
    /// (`.some(nil)` for no entry; `nil` while a queued local change shows instead, which has no
    /// order yet); `nil` (after logging why) when it cannot be read.
    /// The ticket is that of the queued local change read, if one was.
    private func read() -> (K.Value, Fingerprint, ConflictOrder??, UInt64?)? {
        do {
            let eventLog = try reader.observedLog
            var visible = try mappingErrors { try eventLog.visibleEntry(key.domain, key.name) }
            if let ticket = visible?.ticket, ticket <= eventLog.local.publishedTicket.load(ordering: .acquiring) {
                // Committed and published, not settled yet: read what it committed as, with its
                // place in the conflict order. The commit's events may still reach this channel
                // (the hub delivers them after it opened): that order tells them from news. Read
                // as queued (no order), a foreign event of the same commit (a held-back event
                // promoted in it) would pass for news: a value no read ever returned.
                visible = try mappingErrors { try eventLog.committedEntry(key.domain, key.name) }.map { VisibleEntry(entry: $0, ticket: nil) }
            }
            let entry = visible?.entry
            guard let (value, fingerprint) = decode(entry) else { return nil }
            let order: ConflictOrder?? =
                if let visible { visible.ticket == nil ? .some(visible.entry.order) : nil } else { .some(nil) }
            // A queued change still visible as queued is outstanding until its commit is heard.
            return (value, fingerprint, order, visible?.ticket)
        } catch {
            reader.reportObservationError(error, key: key)
            return nil
        }
    }

    /// The value of an entry (the default for none or a remove, former names consulted) and its fingerprint.
    private func decode(_ entry: ViewEntry?) -> (K.Value, Fingerprint)? {
        do {
            let value = try reader.observedValue(entry, for: key)
            guard !ValueCoder.isNil(value) else { return (value, Fingerprint(present: false, encoding: 0, payload: [])) }
            let (encoding, payload) = try ValueCoder.encode(value, key: key.name)
            return (value, Fingerprint(present: true, encoding: encoding.rawValue, payload: payload))
        } catch {
            reader.reportObservationError(error, key: key)
            return nil
        }
    }
}
