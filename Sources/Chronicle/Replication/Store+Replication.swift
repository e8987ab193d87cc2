public import Foundation

extension Store {
    /// This replica's identity, epoch and head, for a peer starting a sync.
    public func replicaInfo() throws(ChronicleError) -> ReplicaInfo {
        let eventLog = try eventLog
        return try mappingErrors {
            ReplicaInfo(
                replicaID: eventLog.replica, epoch: try eventLog.epoch(), protocolVersion: EventRange.protocolVersion,
                head: try eventLog.head().sequence)
        }
    }

    /// A range of this replica's log after sequence `after`, encoded in the
    /// versioned range format (what a peer pulls, or `chronicle export` writes).
    ///
    /// - Parameters:
    ///   - after: The last sequence the receiver already has from this log.
    ///   - filter: Which events travel. `.never` events never do.
    ///   - origin: Leave out events made by this replica (the receiver's own).
    ///   - maxEvents: At most this many events (at least one when any is left).
    ///   - maxBytes: About this many payload bytes at most (a single larger event still travels alone).
    public func exportRange(
        after: UInt64, filter: RangeFilter = .syncable, excludingOrigin origin: ReplicaID? = nil,
        maxEvents: Int = 256, maxBytes: Int = 1 << 20
    ) throws(ChronicleError) -> Data {
        let eventLog = try eventLog
        return try mappingErrors {
            Data(try eventLog.exportRange(after: after, filter: filter, excluding: origin, maxEvents: max(1, maxEvents), maxBytes: maxBytes).encoded())
        }
    }

    /// Applies a range received from a peer or read from a file, in one durable transaction.
    ///
    /// Re-sent events are skipped; an event that conflicts with one this
    /// replica has under the same identity, a malformed or truncated range, or
    /// an unsealed secret fails the whole range and applies nothing.
    public func importRange(_ data: Data) throws(ChronicleError) -> RangeReceipt {
        try importRange(EventRange(decoding: Array(data)), checkpoint: nil)
    }

    func importRange(_ range: EventRange, checkpoint: (key: CheckpointKey, value: UInt64)?) throws(ChronicleError) -> RangeReceipt {
        let eventLog = try eventLog
        return try mappingErrors {
            try eventLog.importRange(range, checkpoint: checkpoint, requireSealedDefaults: configuration.encryptDefaults)
        }
    }

    /// Every syncable event with sequence in `range`, as one range file (for `chronicle export`).
    /// - Throws: ``ChronicleError/invalidArgument(_:)`` when the events do not fit one file (256 MiB); export smaller ranges.
    public func exportFile(sequences range: ClosedRange<UInt64>) throws(ChronicleError) -> Data {
        let eventLog = try eventLog
        let cut = try mappingErrors {
            try eventLog.exportRange(
                after: range.lowerBound > 0 ? range.lowerBound - 1 : 0, filter: .syncable, excluding: nil,
                maxEvents: EventRange.maxItems / 2, maxBytes: EventRange.maxEncodedSize / 2, through: range.upperBound)
        }
        guard cut.upTo >= min(range.upperBound, cut.head) else {
            throw .invalidArgument("sequences \(range.lowerBound)...\(range.upperBound) do not fit one file; export up to \(cut.upTo) first")
        }
        return Data(cut.encoded())
    }
}
