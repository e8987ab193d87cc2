import ChronicleFormat
import ChronicleLog
/// The decisions of one exchange with a peer, apart from every read, write and request: where
/// the pull starts and when it starts over, whether the remote went back in time, where the push
/// starts and what it leaves out, and which mailbox file marks what a device relies on.
/// ``Replicator`` does the I/O and asks this value what to do; its unit tests drive it alone.
struct ExchangeState: Sendable {
    /// How often one exchange starts its pull over because the peer's log changed under it.
    static let maxRestarts = 3

    /// A peer without a log of its own (a mailbox folder): its positions are files, which come
    /// and go, so a moved position is no sign that it lost anything.
    let passive: Bool
    /// The head the peer named before the exchange began: the pull ends there.
    let remoteHead: UInt64
    let maxPullBatches: Int

    /// Where the next pull starts, and the chain hash the peer's log must have there.
    private(set) var after: UInt64
    private(set) var expectedChain: [UInt8]?
    /// The remote's log went back in time (restored, rolled back): push everything again.
    private(set) var remoteWentBack = false
    private(set) var restarts = 0
    private(set) var batches = 0
    /// The local sequences this exchange's pulls took, ascending and merged: never pushed back.
    private(set) var pulledHere: [ClosedRange<UInt64>] = []
    /// How far the peer holds what this device pushed with the push's filter, when it says
    /// (``ReplicaInfo/pushMarks``, a hub): then the push starts there if that is before the
    /// checkpoint, and no probe of the peer's chain is needed.
    private(set) var pushMark: UInt64?

    /// - Parameters:
    ///   - checkpoint: the pull checkpoint for (peer, its epoch, pull, filter).
    ///   - remoteHead: the head the peer's `info()` named.
    ///   - passive: whether the peer is passive (reports no writer and keeps no log: a mailbox).
    ///   - maxPullBatches: the most batches one pull may take.
    init(checkpoint: CheckpointValue, remoteHead: UInt64, passive: Bool, maxPullBatches: Int) {
        self.passive = passive
        self.remoteHead = remoteHead
        self.maxPullBatches = maxPullBatches
        if checkpoint.sequence > remoteHead {
            // A checkpoint the remote cannot honour: start over (identities make it safe).
            after = 0
            expectedChain = nil
            remoteWentBack = !passive
        } else {
            after = checkpoint.sequence
            expectedChain = checkpoint.chain
        }
    }

    /// What to do with a range the peer answered to a pull.
    enum PullVerdict: Equatable {
        /// Import it.
        case apply
        /// The peer's log moved under the pull: ask again from ``after`` (now 0).
        case startOver
    }

    /// Counts a pull request; past ``maxPullBatches`` the pull stops with an error (what arrived is kept).
    mutating func beginPullBatch() throws(ChronicleError) {
        batches += 1
        guard batches <= maxPullBatches else {
            throw .malformedInput("the peer sent \(maxPullBatches) batches without reaching its head; what arrived is kept, sync again to go on")
        }
    }

    /// Judges the position of a range the peer answered: one of another log or position is
    /// refused, one that starts before ``after`` or under another chain hash starts the pull over.
    mutating func judge(
        source: ReplicaID, epoch: LogEpoch, expectedSource: ReplicaID, expectedEpoch: LogEpoch,
        rangeAfter: UInt64, afterChain: [UInt8], upTo: UInt64
    ) throws(ChronicleError) -> PullVerdict {
        guard source == expectedSource, epoch == expectedEpoch, rangeAfter <= after, upTo >= rangeAfter else {
            throw .malformedInput("the peer answered with a range of another log or position")
        }
        // The remote's positions moved under us (a mailbox pruned between `info()` and this
        // pull): what lies before our checkpoint now is unknown, so read it again from the start.
        // Or the remote's log under our checkpoint is not the one we pulled (restored, or rolled
        // back and written again under old sequence numbers). A mailbox's positions shift when a
        // late file sorts in or old files are pruned: read it again, but nothing pushed there was lost.
        let moved = rangeAfter < after
        let rewritten = after > 0 && rangeAfter == after && expectedChain.map { afterChain != LogHead.empty.chain && afterChain != $0 } == true
        guard moved || rewritten else { return .apply }
        restarts += 1
        guard restarts <= Self.maxRestarts else {
            throw .malformedInput("the peer's log changed under this sync \(Self.maxRestarts) times; sync again later")
        }
        after = 0
        expectedChain = nil
        pulledHere = []  // what it sent before may be gone from it
        if !passive { remoteWentBack = true }
        return .startOver
    }

    /// Records the local sequences an applied range took (later imports take later sequences,
    /// so the windows stay ascending; adjacent ones merge).
    mutating func received(_ windows: [ClosedRange<UInt64>]) {
        for window in windows {
            if let last = pulledHere.last, last.upperBound &+ 1 == window.lowerBound {
                pulledHere[pulledHere.count - 1] = last.lowerBound...window.upperBound
            } else {
                pulledHere.append(window)
            }
        }
    }

    /// Moves past an applied range; `false` when the pull is done (the peer's head, as named
    /// before the pull began, is reached, or the peer made no progress).
    mutating func advance(upTo: UInt64, upToChain: [UInt8], reachesHead: Bool) -> Bool {
        if reachesHead || upTo <= after || upTo >= remoteHead { return false }
        after = upTo
        expectedChain = upToChain
        return true
    }

    // MARK: The push

    /// The position after which to probe the remote's chain, to learn whether it went back since
    /// our last push; `nil`: no probe needed (already known, passive, no mark, or the remote's
    /// head is below the mark, which ``pushCheckpointRead(_:)`` already decided).
    func probePosition(for checkpoint: CheckpointValue) -> UInt64? {
        guard pushMark == nil, !remoteWentBack, !passive, let head = checkpoint.remoteHead, checkpoint.remoteChain != nil, remoteHead >= head else { return nil }
        return head
    }

    /// Reads the push checkpoint's mark of the remote: its log is shorter now than after our
    /// last push, so it went back.
    mutating func pushCheckpointRead(_ checkpoint: CheckpointValue) {
        guard pushMark == nil, !remoteWentBack, !passive, let head = checkpoint.remoteHead, checkpoint.remoteChain != nil else { return }
        if remoteHead < head { remoteWentBack = true }
    }

    /// Reads the peer's push mark for this device's log and the push's filter (`nil`: the peer
    /// keeps none, so the push decides by the remote's head and chain as before).
    mutating func pushMarkRead(_ mark: UInt64?) {
        pushMark = mark
    }

    /// The remote's chain hash at ``probePosition(for:)``: another than the mark's means it went back.
    mutating func probed(rangeAfter: UInt64, afterChain: [UInt8], checkpoint: CheckpointValue) {
        guard let head = checkpoint.remoteHead, let chain = checkpoint.remoteChain else { return }
        if rangeAfter == head, afterChain != LogHead.empty.chain, afterChain != chain { remoteWentBack = true }
    }

    /// The file this device relies on a mailbox holding, when it has one: `nil` when it need not
    /// be checked (active peer, nothing pushed yet, or already known to have gone back).
    func mailboxMarkToCheck(_ checkpoint: CheckpointValue) -> [UInt8]? {
        guard passive, !remoteWentBack, checkpoint.sequence > 0 else { return nil }
        return checkpoint.remoteChain
    }

    /// The mailbox no longer holds the mark: it was restored from an older backup.
    mutating func mailboxLostMark() {
        remoteWentBack = true
    }

    /// Where the push starts: 0 when our own log under the checkpoint changed
    /// (`localChainMatches` false) or under the peer's push mark (`localChainMatchesMark` false:
    /// this store was restored from its own backup and wrote again under old sequences); the
    /// peer's push mark when it is before the checkpoint (the peer lost what was pushed after it:
    /// only that goes again); 0 when the remote went back and keeps no marks; else the checkpoint.
    func pushStart(checkpoint: CheckpointValue, localChainMatches: Bool, localChainMatchesMark: Bool = true) -> UInt64 {
        if checkpoint.chain != nil, checkpoint.sequence > 0, !localChainMatches { return 0 }
        if let pushMark { return localChainMatchesMark ? min(pushMark, checkpoint.sequence) : 0 }
        if remoteWentBack { return 0 }
        return checkpoint.sequence
    }

    /// The local sequences a push leaves out: what this peer just sent, unless it went back
    /// (then it gets everything again).
    var skipping: [ClosedRange<UInt64>] { remoteWentBack && pushMark == nil ? [] : pulledHere }

    /// Whether to set a new mailbox mark after the push, and whose newest file it is: this
    /// device's own (`own`), or the newest of anyone's when it left out what it pulled there
    /// (what it pulled is at or before that file).
    func mailboxMark(pushedAny: Bool) -> (set: Bool, own: Bool) {
        (passive && (pushedAny || !pulledHere.isEmpty), pulledHere.isEmpty)
    }

    /// Whether to remember where the remote's log stood after the push (only `sync()`'s
    /// filter: automatic pushes never move that mark, so they re-send anyway).
    func marksRemoteAfterPush(pushedAny: Bool, filter: RangeFilter) -> Bool {
        pushedAny && filter == .syncable && !passive && pushMark == nil
    }
}
