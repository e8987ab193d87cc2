import Foundation

/// What ``Store/compact(before:dropRelayOnly:progress:)`` did.
public struct CompactionReport: Sendable, Equatable {
    /// Events in the log before compaction.
    public var recordsBefore: Int
    /// Events dropped (their identities are kept, so they are never imported again).
    public var dropped: Int
    /// Events kept.
    public var kept: Int
    /// Push checkpoints carried over to the new sequence numbers (peers resume where they were).
    public var checkpointsCarried: Int
    /// Relay-only records dropped (with `dropRelayOnly`).
    public var relayOnlyDropped: Int = 0

    package init(recordsBefore: Int, dropped: Int, kept: Int, checkpointsCarried: Int, relayOnlyDropped: Int = 0) {
        self.recordsBefore = recordsBefore
        self.dropped = dropped
        self.kept = kept
        self.checkpointsCarried = checkpointsCarried
        self.relayOnlyDropped = relayOnlyDropped
    }
}
