@testable import Chronicle
@testable import ChronicleLog
import Testing

/// The replicator's decisions, without a store or a peer: where a pull starts and starts over,
/// when a remote counts as gone back in time, where a push starts and what it leaves out, and
/// the mailbox's marks.
@Suite struct ExchangeStateTests {
    let peer = ReplicaID.random()
    let epoch = LogEpoch.random()
    let chainA = [UInt8](repeating: 0xA1, count: 32)
    let chainB = [UInt8](repeating: 0xB2, count: 32)
    let none = LogHead.empty.chain

    func state(checkpoint: CheckpointValue = .zero, head: UInt64 = 100, passive: Bool = false, batches: Int = 65_536) -> ExchangeState {
        ExchangeState(checkpoint: checkpoint, remoteHead: head, passive: passive, maxPullBatches: batches)
    }

    /// Judges a range of this peer and epoch starting at `after`.
    func judge(_ state: inout ExchangeState, after: UInt64, chain: [UInt8], upTo: UInt64 = 100) throws -> ExchangeState.PullVerdict {
        try state.judge(source: peer, epoch: epoch, expectedSource: peer, expectedEpoch: epoch, rangeAfter: after, afterChain: chain, upTo: upTo)
    }

    @Test func aPullStartsAtItsCheckpoint() {
        let state = state(checkpoint: CheckpointValue(sequence: 40, chain: chainA))
        #expect(state.after == 40)
        #expect(state.expectedChain == chainA)
        #expect(!state.remoteWentBack)
    }

    /// A checkpoint past the remote's head: the remote was restored or rolled back. Pull from 0;
    /// an active remote also gets everything pushed again, a mailbox does not (its positions are files).
    @Test(arguments: [false, true])
    func aCheckpointPastTheHeadRestartsAtZero(passive: Bool) {
        let state = state(checkpoint: CheckpointValue(sequence: 150, chain: chainA), head: 100, passive: passive)
        #expect(state.after == 0)
        #expect(state.expectedChain == nil)
        #expect(state.remoteWentBack == !passive)
    }

    @Test func aRangeOfAnotherLogOrPositionIsRefused() throws {
        var state = state(checkpoint: CheckpointValue(sequence: 10, chain: chainA))
        #expect(throws: ChronicleError.self) {
            try state.judge(source: ReplicaID.random(), epoch: epoch, expectedSource: peer, expectedEpoch: epoch, rangeAfter: 10, afterChain: chainA, upTo: 20)
        }
        #expect(throws: ChronicleError.self) {
            try state.judge(source: peer, epoch: LogEpoch.random(), expectedSource: peer, expectedEpoch: epoch, rangeAfter: 10, afterChain: chainA, upTo: 20)
        }
        #expect(throws: ChronicleError.self) { try judge(&state, after: 11, chain: chainA) }  // past where we asked
        #expect(throws: ChronicleError.self) { try judge(&state, after: 10, chain: chainA, upTo: 9) }  // ends before it starts
    }

    /// The remote's log under our checkpoint has another chain hash: it was rewritten. Start
    /// over from 0, forget what it sent (it may be gone from it), and push everything again.
    @Test func aRewrittenLogStartsThePullOver() throws {
        var state = state(checkpoint: CheckpointValue(sequence: 10, chain: chainA))
        state.received([1...5])
        let rewritten = try judge(&state, after: 10, chain: chainB)
        #expect(rewritten == .startOver)
        #expect(state.after == 0 && state.expectedChain == nil)
        #expect(state.pulledHere.isEmpty)
        #expect(state.remoteWentBack)
        #expect(state.skipping.isEmpty)
        // The same chain, or a remote that does not say (zeros), is applied.
        var same = self.state(checkpoint: CheckpointValue(sequence: 10, chain: chainA))
        let sameChain = try judge(&same, after: 10, chain: chainA)
        #expect(sameChain == .apply)
        let unsaid = try judge(&same, after: 10, chain: none)
        #expect(unsaid == .apply)
    }

    /// A mailbox pruned between `info()` and the pull answers from before our checkpoint: read
    /// it again, but nothing pushed there was lost.
    @Test func aMovedMailboxStartsOverWithoutPushingAgain() throws {
        var state = state(checkpoint: CheckpointValue(sequence: 10, chain: chainA), passive: true)
        let moved = try judge(&state, after: 4, chain: chainA)
        #expect(moved == .startOver)
        #expect(state.after == 0)
        #expect(!state.remoteWentBack)
    }

    @Test func aPullStartsOverAtMostThreeTimes() throws {
        var state = state()
        for _ in 0..<ExchangeState.maxRestarts {
            let fromZero = try judge(&state, after: 0, chain: none)
            #expect(fromZero == .apply)
            _ = state.advance(upTo: 10, upToChain: chainA, reachesHead: false)
            let rewrittenAgain = try judge(&state, after: 10, chain: chainB)
            #expect(rewrittenAgain == .startOver)
        }
        let lastFromZero = try judge(&state, after: 0, chain: none)
        #expect(lastFromZero == .apply)
        _ = state.advance(upTo: 10, upToChain: chainA, reachesHead: false)
        #expect(throws: ChronicleError.self) { try judge(&state, after: 10, chain: chainB) }
    }

    @Test func aPullTakesAtMostItsBatches() throws {
        var state = state(batches: 2)
        try state.beginPullBatch()
        try state.beginPullBatch()
        #expect(throws: ChronicleError.self) { try state.beginPullBatch() }
    }

    /// A pull ends at the head the remote named first, at its own head, or when it makes no progress.
    @Test func aPullEndsAtTheNamedHead() {
        var state = state(head: 100)
        let moving = state.advance(upTo: 50, upToChain: chainA, reachesHead: false)
        #expect(moving)
        #expect(state.after == 50 && state.expectedChain == chainA)
        let stalled = state.advance(upTo: 50, upToChain: chainA, reachesHead: false)
        #expect(!stalled, "no progress")
        let pastHead = state.advance(upTo: 120, upToChain: chainB, reachesHead: false)
        #expect(!pastHead, "past the named head")
        var other = self.state(head: 100)
        let atHead = other.advance(upTo: 60, upToChain: chainA, reachesHead: true)
        #expect(!atHead)
    }

    /// What a peer sent is never pushed back to it: windows merge as they arrive.
    @Test func receivedWindowsMergeAndAreSkipped() {
        var state = state()
        state.received([3...5])
        state.received([6...8, 12...12])
        state.received([13...20])
        #expect(state.pulledHere == [3...8, 12...20])
        #expect(state.skipping == [3...8, 12...20])
    }

    /// The push checkpoint's mark of the remote: a shorter log now, or another chain hash where
    /// it stood, means it went back; a passive peer is never probed.
    @Test func aRemoteBehindThePushMarkWentBack() {
        let mark = CheckpointValue(sequence: 30, chain: chainA, remoteHead: 80, remoteChain: chainB)
        var shorter = state(head: 70)
        shorter.pushCheckpointRead(mark)
        #expect(shorter.remoteWentBack)
        #expect(shorter.probePosition(for: mark) == nil)

        var probed = state(head: 90)
        probed.pushCheckpointRead(mark)
        #expect(!probed.remoteWentBack)
        #expect(probed.probePosition(for: mark) == 80)
        probed.probed(rangeAfter: 80, afterChain: chainB, checkpoint: mark)
        #expect(!probed.remoteWentBack, "the same chain where it stood")
        probed.probed(rangeAfter: 80, afterChain: chainA, checkpoint: mark)
        #expect(probed.remoteWentBack, "another chain where it stood")

        #expect(state(head: 90, passive: true).probePosition(for: mark) == nil)
        #expect(state(head: 90).probePosition(for: CheckpointValue(sequence: 30, chain: chainA)) == nil, "no mark yet")
    }

    /// The push starts at its checkpoint, or at 0 when the remote went back or our own log under
    /// the checkpoint changed.
    @Test func thePushStartsAtItsCheckpointUnlessSomethingWentBack() {
        let checkpoint = CheckpointValue(sequence: 30, chain: chainA)
        #expect(state().pushStart(checkpoint: checkpoint, localChainMatches: true) == 30)
        #expect(state().pushStart(checkpoint: checkpoint, localChainMatches: false) == 0)
        #expect(state(checkpoint: CheckpointValue(sequence: 150, chain: nil), head: 100).pushStart(checkpoint: checkpoint, localChainMatches: true) == 0)
    }

    /// A peer's push mark (a hub's) decides where the push starts: from the mark when the peer
    /// holds less than the checkpoint says (it was restored), never past the checkpoint; with a
    /// mark, the remote's head and chain are not probed and not marked, and what was just pulled
    /// is still left out.
    @Test func aPushMarkBehindTheCheckpointStartsThePushThere() {
        let checkpoint = CheckpointValue(sequence: 30, chain: chainA, remoteHead: 80, remoteChain: chainB)
        var restored = state(checkpoint: CheckpointValue(sequence: 150, chain: nil), head: 60)
        restored.received([31...33])
        restored.pushMarkRead(12)
        restored.pushCheckpointRead(checkpoint)
        #expect(restored.pushStart(checkpoint: checkpoint, localChainMatches: true) == 12, "only what the hub lacks")
        #expect(restored.pushStart(checkpoint: checkpoint, localChainMatches: false) == 0, "our own log changed")
        #expect(
            restored.pushStart(checkpoint: checkpoint, localChainMatches: true, localChainMatchesMark: false) == 0,
            "our log under the mark is not the one pushed there (restored from our own backup)")
        #expect(restored.probePosition(for: checkpoint) == nil)
        #expect(!restored.marksRemoteAfterPush(pushedAny: true, filter: .syncable))
        #expect(restored.skipping == [31...33])

        var ahead = state()
        ahead.pushMarkRead(45)
        #expect(ahead.pushStart(checkpoint: checkpoint, localChainMatches: true) == 30, "a mark past the checkpoint moves nothing")
        var none = state()
        none.pushMarkRead(0)
        #expect(none.pushStart(checkpoint: checkpoint, localChainMatches: true) == 0, "no mark for this log: the hub holds none of it")
        var older = state()
        older.pushMarkRead(nil)
        #expect(older.probePosition(for: checkpoint) == 80, "a peer without marks is probed as before")
    }

    /// The mailbox's mark: checked only for a mailbox this device pushed to; set after a push, or
    /// after a pull (then the newest file of anyone's, since what it pulled is at or before it).
    @Test func mailboxMarks() {
        let pushed = CheckpointValue(sequence: 30, chain: chainA, remoteHead: 0, remoteChain: chainB)
        #expect(state(passive: true).mailboxMarkToCheck(pushed) == chainB)
        #expect(state().mailboxMarkToCheck(pushed) == nil, "an active peer has no mark file")
        #expect(state(passive: true).mailboxMarkToCheck(.zero) == nil, "nothing pushed yet")

        var mailbox = state(passive: true)
        #expect(mailbox.mailboxMark(pushedAny: false).set == false, "nothing pushed or pulled")
        #expect(mailbox.mailboxMark(pushedAny: true) == (true, true))
        mailbox.received([4...6])
        #expect(mailbox.mailboxMark(pushedAny: false) == (true, false))
        mailbox.mailboxLostMark()
        #expect(mailbox.remoteWentBack && mailbox.skipping.isEmpty)

        #expect(state().mailboxMark(pushedAny: true).set == false)
        #expect(state().marksRemoteAfterPush(pushedAny: true, filter: .syncable))
        #expect(!state().marksRemoteAfterPush(pushedAny: false, filter: .syncable))
        #expect(!state(passive: true).marksRemoteAfterPush(pushedAny: true, filter: .syncable))
        #expect(!state().marksRemoteAfterPush(pushedAny: true, filter: .automaticSmall(maxPayload: 1024)))
    }
}
