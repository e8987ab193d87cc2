/// Direction of a replication checkpoint.
package enum CheckpointDirection: UInt8, Sendable {
    case pull = 1
    case push = 2
}

/// The key of a replication checkpoint in the `peers` database:
///
/// ```
/// [16]  peer replica id
/// [16]  log epoch (the peer's for pulls, this log's for pushes)
/// u8    direction (1 pull, 2 push)
/// u8    range filter code
/// ```
///
/// The value is the last sequence acknowledged in that direction, u64 big-endian.
package struct CheckpointKey: Sendable, Hashable {
    package static let byteCount = 16 + LogEpoch.byteCount + 2

    package var peer: ReplicaID
    package var epoch: LogEpoch
    package var direction: CheckpointDirection
    /// ``RangeFilter/code`` of the filter the checkpoint counts for.
    package var filterCode: UInt8

    package var bytes: [UInt8] { peer.bytes + epoch.bytes + [direction.rawValue, filterCode] }

    /// The same checkpoint in another epoch of the log it counts (compaction carries push checkpoints over).
    package func withEpoch(_ epoch: LogEpoch) -> CheckpointKey {
        CheckpointKey(peer: peer, epoch: epoch, direction: direction, filterCode: filterCode)
    }

    package init(peer: ReplicaID, epoch: LogEpoch, direction: CheckpointDirection, filter: RangeFilter) {
        self.init(peer: peer, epoch: epoch, direction: direction, filterCode: filter.code)
    }

    private init(peer: ReplicaID, epoch: LogEpoch, direction: CheckpointDirection, filterCode: UInt8) {
        self.peer = peer
        self.epoch = epoch
        self.direction = direction
        self.filterCode = filterCode
    }

    /// Parses a stored key; `nil` for anything that is not a checkpoint key.
    package init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount,
            let peer = ReplicaID(bytes: Array(bytes[0..<16])),
            let epoch = LogEpoch(bytes: Array(bytes[16..<32])),
            let direction = CheckpointDirection(rawValue: bytes[32])
        else { return nil }
        self.init(peer: peer, epoch: epoch, direction: direction, filterCode: bytes[33])
    }
}
