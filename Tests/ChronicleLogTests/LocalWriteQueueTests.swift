@testable import ChronicleFormat
@testable import ChronicleLog
import Testing

/// The local write queue of the non-throwing forms as a value, without LMDB: tickets, what reads
/// see, settlement and back pressure; and the failures kept for the next flush.
@Suite struct LocalWriteQueueTests {
    /// A sealer that is never called: the queue only asks whether a change has one.
    struct MarkedSecret: EventSealer {
        struct NeverCalled: Error {}
        func sealingKey(active: KeyID?, record: (KeyID) throws -> WrappedKey?) throws -> SealingKey { throw NeverCalled() }
        func seal(_ event: inout Event, with key: SealingKey) throws {}
        func authenticate(_ event: inout Event, with key: SealingKey) throws {}
    }

    static func change(_ name: String, _ value: UInt8, domain: Domain = .defaults, sealed: Bool = false) -> PendingChange {
        PendingChange(
            domain: domain, key: name, policy: .never, op: .set, encoding: 0, payload: [value], sealer: sealed ? MarkedSecret() : nil)
    }

    @Test func ticketsFollowTheOrderOfTheCallsAcrossBatches() {
        var queue = LocalWriteQueue()
        let first = queue.admit([Self.change("a", 1), Self.change("b", 2)])
        let second = queue.admit([Self.change("c", 3)])
        #expect(first.tickets == [1, 2])
        #expect(second.tickets == [3])
        #expect(first.queued.map(\.ticket) == [1, 2], "the committer gets each change with its ticket")
        #expect(queue.lastTicket == 3)
    }

    @Test func aReadSeesTheNewestQueuedChangeOfItsKey() {
        var queue = LocalWriteQueue()
        _ = queue.admit([Self.change("theme", 1)])
        _ = queue.admit([Self.change("theme", 2)])
        #expect(queue.entry(.defaults, "theme")?.change.payload == [2])
        #expect(queue.entry(.defaults, "theme")?.ticket == 2)
        #expect(queue.entry(.secrets, "theme") == nil, "a domain is part of the key")
        #expect(queue.entry(.defaults, "other") == nil)
    }

    /// The first change's commit settles after the second was queued: the key keeps showing the
    /// second until its own commit settles.
    @Test func settlingAnOlderChangeKeepsANewerOneOfTheSameKey() {
        var queue = LocalWriteQueue()
        let old = queue.admit([Self.change("theme", 1)])
        let new = queue.admit([Self.change("theme", 2)])
        #expect(queue.settle(old.queued, tickets: old.tickets).isEmpty)
        #expect(queue.entry(.defaults, "theme")?.change.payload == [2])
        _ = queue.settle(new.queued, tickets: new.tickets)
        #expect(queue.entry(.defaults, "theme") == nil)
        #expect(queue.entries.isEmpty)
    }

    /// A batch settles at once when nothing else is queued, and key by key when a later
    /// admission is: then only the batch's own entries go.
    @Test func aBatchSettlesWholeOrKeyByKeyBesideALaterOne() {
        var queue = LocalWriteQueue()
        let batch = queue.admit([Self.change("a", 1), Self.change("b", 2), Self.change("a", 3)])
        let later = queue.admit([Self.change("c", 4)])
        _ = queue.settle(batch.queued, tickets: batch.tickets)
        #expect(queue.entries.count == 1)
        #expect(queue.entry(.defaults, "c")?.change.payload == [4])
        let alone = queue.admit([Self.change("d", 5), Self.change("e", 6)])
        _ = queue.settle(later.queued, tickets: later.tickets)
        #expect(queue.entries.count == 2, "the batch after it stays")
        _ = queue.settle(alone.queued, tickets: alone.tickets)
        #expect(queue.entries.isEmpty)
    }

    /// A sealed change's plaintext is visible in a copy of its own (the committer wipes its
    /// own), and settlement hands that copy back for wiping.
    @Test func aSealedChangeIsVisibleInACopyThatSettlementHandsBack() {
        var queue = LocalWriteQueue()
        let admission = queue.admit([Self.change("token", 7, domain: .secrets, sealed: true), Self.change("plain", 8)])
        #expect(admission.visible[0].payload == [7])
        var committerCopy = admission.queued[0].payload
        committerCopy[0] = 0  // what the committer's wipe does to its own
        #expect(queue.entry(.secrets, "token")?.change.payload == [7], "the visible copy is not the committer's")
        let forgotten = queue.settle(admission.queued, tickets: admission.tickets)
        #expect(forgotten.map(\.key) == ["token"], "only sealed changes come back for wiping")
    }

    @Test func aChangeWaitsForItsOwnCommitOnceTheQueueIsFull() {
        #expect(!LocalWriteQueue.mustWait(unsettled: 0))
        #expect(!LocalWriteQueue.mustWait(unsettled: LocalWriteQueue.capacity - 1))
        #expect(LocalWriteQueue.mustWait(unsettled: LocalWriteQueue.capacity))
    }

    @Test func aFlushTakesTheFailuresOfItsTicketsOnlyAndThrowsTheFirst() {
        var failures = UnreportedWriteFailures()
        let full = ChronicleError.storeUnavailable(reason: "full")
        _ = failures.record(WriteFailure(keys: ["a"], error: full), ticket: 2)
        _ = failures.record(WriteFailure(keys: ["b"], error: full), ticket: 5)
        _ = failures.record(WriteFailure(keys: ["c"], error: full), ticket: 9)
        #expect(failures.take(through: 5)?.keys == ["a"])
        #expect(failures.unreported.map(\.ticket) == [9], "a later write's failure waits for its own flush")
        #expect(failures.take(through: 5) == nil)
        #expect(failures.take(through: 9)?.keys == ["c"])
    }

    @Test func failuresAreKeptUpToTheLimitAndEveryListenerHearsThem() {
        var failures = UnreportedWriteFailures()
        let (stream, continuation) = AsyncStream<WriteFailure>.makeStream()
        let id = failures.addListener(continuation)
        let failure = WriteFailure(keys: ["a"], error: .storeUnavailable(reason: "full"))
        for ticket in 1...UInt64(UnreportedWriteFailures.limit + 10) {
            #expect(failures.record(failure, ticket: ticket).count == 1)
        }
        #expect(failures.unreported.count == UnreportedWriteFailures.limit)
        #expect(failures.unreported.first?.ticket == 1, "the first ones are kept")
        failures.removeListener(id)
        #expect(failures.record(failure, ticket: 1_000).isEmpty)
        _ = stream
    }
}
