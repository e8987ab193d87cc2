import ChronicleFormat
import ChronicleLog

/// What a replicator needs of its store, and nothing more: the replica's identity, the
/// checkpoints of its exchanges, ranges out of the log and into it (through the store's
/// keyring), the events it lost, and a word when something commits. The replicator reaches the
/// store's log only through this.
struct ReplicaLog: Sendable {
    let store: Store

    /// This replica's id, epoch, head and writer.
    func info() throws -> ReplicaInfo { try store.replicaInfo() }

    /// The pull checkpoint under `key`; first, when a flood pushed lost events out of the list
    /// of wanted ones, every pull checkpoint is deleted (everything is pulled again).
    func pullCheckpoint(_ key: CheckpointKey) throws -> CheckpointValue {
        let log = try store.eventLog
        try WantedEvents.rewindPullsIfMarked(in: log.storage)
        return try log.checkpoints.value(key)
    }

    /// The push checkpoint under `key`, once the keys that travel with a push are ready.
    func pushCheckpoint(_ key: CheckpointKey) throws -> CheckpointValue {
        try store.prepareTravelKeys()
        return try store.eventLog.checkpoints.value(key)
    }

    func setCheckpoint(_ key: CheckpointKey, to value: CheckpointValue) throws {
        try store.eventLog.checkpoints.set(key, to: value)
    }

    /// Reads the checkpoint under `key`, changes it and writes it back.
    func updateCheckpoint(_ key: CheckpointKey, _ change: (inout CheckpointValue) -> Void) throws {
        let log = try store.eventLog
        var value = try log.checkpoints.value(key)
        change(&value)
        try log.checkpoints.set(key, to: value)
    }

    /// Whether the log's record at `sequence` still has the chain hash `chain`.
    /// A sequence inside a gap matches only when `insideGapMatches` (a checkpoint of this log).
    func chainMatches(at sequence: UInt64, _ chain: [UInt8], insideGapMatches: Bool = true) throws -> Bool {
        try store.eventLog.gaps.chainMatches(at: sequence, chain, insideGapMatches: insideGapMatches)
    }

    /// The next batch to push.
    func export(
        after: UInt64, filter: RangeFilter, excluding origin: ReplicaID?, maxEvents: Int, maxBytes: Int, skipping: [ClosedRange<UInt64>]
    ) throws -> EventRange {
        try store.eventLog.rangeExport.exportRange(after: after, filter: filter, excluding: origin, maxEvents: maxEvents, maxBytes: maxBytes, skipping: skipping)
    }

    /// Imports a pulled batch with its checkpoint, in one transaction; returns the receipt and
    /// the sequences the batch took here (never pushed back to its sender).
    func importPulled(
        _ range: EventRange, checkpoint: (key: CheckpointKey, value: UInt64, chain: [UInt8]), source: String
    ) throws -> (receipt: RangeReceipt, received: [ClosedRange<UInt64>]) {
        try store.importRangeReportingReceived(range, checkpoint: checkpoint, source: source)
    }

    /// The identities of lost events due to be asked for again.
    func wantedEvents() throws -> [EventIdentity] { try WantedEvents.due(in: store.eventLog.storage) }

    /// Imports a peer's answer to a request for `wanted`, and settles the request: `whole`, when
    /// the peer said it, is for each distinct identity of `wanted` whether it had room for it.
    func importAnswer(_ range: EventRange, to wanted: [EventIdentity], whole: [Bool]?, source: String) throws -> RangeReceipt {
        let receipt = try store.importRange(range, checkpoint: nil, source: source)
        try WantedEvents.settle(asked: wanted, whole: whole, in: store.eventLog.storage)
        return receipt
    }

    /// Calls `handler` for every change committed from now on (and keeps an eye on other
    /// processes' commits); returns the id for ``stopObserving(_:)``, `nil` for a closed store.
    func observeCommits(_ handler: @escaping ObserverHub.Handler) -> Int? {
        guard let log = try? store.eventLog else { return nil }
        let id = log.observers.add(handler)
        log.startPollingIfNeeded()
        return id
    }

    func stopObserving(_ id: Int) {
        (try? store.eventLog)?.observers.remove(id)
    }
}
