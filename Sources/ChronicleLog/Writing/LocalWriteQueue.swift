package import ChronicleFormat

/// The changes of the non-throwing forms (`store[key] = value`, `@Default`/`@Secret` setters)
/// between the moment they return and the moment their commit is settled, as a value: tickets,
/// what reads see meanwhile, and what a settlement forgets. No LMDB and no lock here: the log
/// keeps one in a `Mutex` (``EventLog/pending``), and ``LocalWriteQueueTests`` drives it alone.
///
/// A change is queued for the group committer at once, in order with every other local write of
/// the process, and committed moments later on a background queue; until then reads and
/// observers of this process see it here. A crash of the process or the machine in those
/// moments loses it (never anything older); a power cut never damages the store.
package struct LocalWriteQueue: Sendable {
    /// The most changes queued at once: beyond it, a change waits for its own commit (ten
    /// group-commit transactions' worth; a trickle never gets near it).
    package static let capacity = 10_240

    /// A queued change's key: its name compared by bytes, as the store keeps names (``KeyName``).
    package struct Key: Hashable, Sendable {
        package var domain: Domain
        package var name: String

        package init(domain: Domain, name: String) {
            self.domain = domain
            self.name = name
        }

        package static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.domain == rhs.domain && KeyName(lhs.name) == KeyName(rhs.name)
        }

        package func hash(into hasher: inout Hasher) {
            hasher.combine(domain)
            hasher.combine(name)
        }
    }

    /// The newest queued change of a key, and its place among local writes.
    package struct Entry: Sendable {
        package var ticket: UInt64
        package var change: PendingChange
    }

    /// What ``admit(_:)`` made of a batch of changes.
    package struct Admission: Sendable {
        /// The changes with their tickets, for the committer (which wipes sealed plaintexts as
        /// soon as their transaction is over).
        package var queued: [PendingChange]
        /// What reads and observers see: sealed plaintexts in a copy of their own.
        package var visible: [PendingChange]
        package var tickets: [UInt64]
    }

    /// The newest queued change of each key.
    package private(set) var entries: [Key: Entry] = [:]
    /// The last ticket handed out: a flush covers the changes queued up to it.
    package private(set) var lastTicket: UInt64 = 0

    package init() {}

    /// Whether a change made now waits for its own commit instead of queuing (back pressure:
    /// a writer faster than the disk, so the queue, and what a crash can lose, stays bounded).
    package static func mustWait(unsettled: Int) -> Bool { unsettled >= capacity }

    /// Gives each change the next ticket and makes it what reads of its key see, replacing an
    /// older queued change of the same key.
    package mutating func admit(_ changes: [PendingChange]) -> Admission {
        var queued = changes
        var tickets: [UInt64] = []
        tickets.reserveCapacity(queued.count)
        for index in queued.indices {
            lastTicket += 1
            tickets.append(lastTicket)
            queued[index].ticket = lastTicket
        }
        // The same array unless a change is sealed (no copy of every change for nothing).
        var visible = queued
        for index in visible.indices where visible[index].sealer != nil {
            visible[index].payload = queued[index].payload.withUnsafeBufferPointer { Array($0) }
        }
        for index in visible.indices {
            entries[Key(domain: visible[index].domain, name: visible[index].key)] = Entry(ticket: tickets[index], change: visible[index])
        }
        return Admission(queued: queued, visible: visible, tickets: tickets)
    }

    /// The queued change of a key, if any.
    package func entry(_ domain: Domain, _ name: String) -> Entry? {
        entries[Key(domain: domain, name: name)]
    }

    /// Forgets the entries of committed (or failed) changes, unless a later change of the same
    /// key replaced them. Returns the sealed ones forgotten, whose plaintexts the caller wipes
    /// (a reader that took one a moment ago keeps its own copy).
    package mutating func settle(_ changes: [PendingChange], tickets: [UInt64]) -> [PendingChange] {
        var forgotten: [PendingChange] = []
        // An admission's tickets are consecutive. When every queued entry is one of them (a batch
        // no other write overtook: the common case), forget them all at once: removing a key at a
        // time rehashes its neighbours, a third of a batch's own cost. The scan stops at the first
        // entry of another admission, so it never costs more than the batch.
        if let first = tickets.first, let last = tickets.last, entries.allSatisfy({ (first...last).contains($0.value.ticket) }) {
            for entry in entries.values where entry.change.sealer != nil { forgotten.append(entry.change) }
            entries.removeAll(keepingCapacity: true)
            return forgotten
        }
        for (change, ticket) in zip(changes, tickets) {
            // One lookup: the entry's place, then its ticket there.
            guard let place = entries.index(forKey: Key(domain: change.domain, name: change.key)), entries[place].value.ticket == ticket
            else { continue }
            let entry = entries.remove(at: place).value
            if entry.change.sealer != nil { forgotten.append(entry.change) }
        }
        return forgotten
    }
}

/// The failures of queued changes that no flush has thrown yet, and the streams that hear them.
package struct UnreportedWriteFailures: Sendable {
    /// The most failures kept for the next flush (the first ones are kept).
    package static let limit = 256

    /// Oldest first, each with the ticket of its last change.
    package private(set) var unreported: [(ticket: UInt64, failure: WriteFailure)] = []
    private var listeners: [Int: AsyncStream<WriteFailure>.Continuation] = [:]
    private var nextListener = 0

    package init() {}

    /// Keeps `failure` for the next flush (while there is room) and returns who must hear it.
    package mutating func record(_ failure: WriteFailure, ticket: UInt64) -> [AsyncStream<WriteFailure>.Continuation] {
        if unreported.count < Self.limit { unreported.append((ticket, failure)) }
        return Array(listeners.values)
    }

    /// Removes every failure of a change queued up to `ticket` and returns the first (the
    /// others were published to the write-failure streams and logged).
    package mutating func take(through ticket: UInt64) -> WriteFailure? {
        let first = unreported.first(where: { $0.ticket <= ticket })?.failure
        unreported.removeAll { $0.ticket <= ticket }
        return first
    }

    /// Adds a listener; returns its id for ``removeListener(_:)``.
    package mutating func addListener(_ continuation: AsyncStream<WriteFailure>.Continuation) -> Int {
        nextListener += 1
        listeners[nextListener] = continuation
        return nextListener
    }

    package mutating func removeListener(_ id: Int) {
        listeners.removeValue(forKey: id)
    }
}
