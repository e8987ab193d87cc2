import Foundation

/// Sizes and counts of a store (`chronicle stats`).
public struct StoreStatistics: Sendable, Equatable {
    /// This replica's id.
    public var replicaID: ReplicaID
    /// The log epoch, hex.
    public var epoch: String
    /// The last log sequence.
    public var head: UInt64
    /// Log records (events, and an anchor after compaction).
    public var records: Int
    /// Keys with a current entry in the defaults view.
    public var defaultsKeys: Int
    /// Keys with a current entry in the secrets view.
    public var secretKeys: Int
    /// Known event identities (including compacted ones).
    public var dots: Int
    /// Events held back by the clock-drift guard.
    public var deferred: Int
    /// Replication checkpoints.
    public var checkpoints: Int
    /// Wrapped data keys.
    public var dataKeys: Int
    /// Items peers sent that were set aside (see ``Store/quarantinedItems()``).
    public var quarantined: Int
    /// Relay-only records in the log: items kept only to relay (at most 65,536 and 64 MiB).
    public var relayOnly: Int = 0
    /// Their bytes.
    public var relayOnlyBytes: Int = 0
    /// How many relay-only records each source brought (a peer, a file, "HTTP push"), since they were last dropped.
    public var relayOnlyBySource: [String: Int] = [:]
    /// Bytes of the data file in use.
    public var usedBytes: Int
    /// Bytes of the data file on disk.
    public var fileBytes: Int
    /// The reserved map size (address space).
    public var mapSize: Int

    package init(replicaID: ReplicaID, epoch: String, head: UInt64, records: Int, defaultsKeys: Int, secretKeys: Int, dots: Int, deferred: Int, checkpoints: Int, dataKeys: Int, quarantined: Int, relayOnly: Int = 0, relayOnlyBytes: Int = 0, relayOnlyBySource: [String: Int] = [:], usedBytes: Int, fileBytes: Int, mapSize: Int) {
        self.replicaID = replicaID
        self.epoch = epoch
        self.head = head
        self.records = records
        self.defaultsKeys = defaultsKeys
        self.secretKeys = secretKeys
        self.dots = dots
        self.deferred = deferred
        self.checkpoints = checkpoints
        self.dataKeys = dataKeys
        self.quarantined = quarantined
        self.relayOnly = relayOnly
        self.relayOnlyBytes = relayOnlyBytes
        self.relayOnlyBySource = relayOnlyBySource
        self.usedBytes = usedBytes
        self.fileBytes = fileBytes
        self.mapSize = mapSize
    }
}
