public import Foundation

/// A replica's identity as a peer sees it at the start of a sync.
public struct ReplicaInfo: Sendable, Equatable, Codable {
    /// The replica id.
    public var replicaID: ReplicaID
    /// The log epoch: renewed whenever the log's sequence numbers are rewritten.
    public var epoch: [UInt8]
    /// The range protocol version the replica speaks.
    public var protocolVersion: UInt8
    /// The replica's last log sequence.
    public var head: UInt64

    /// Creates an info value.
    public init(replicaID: ReplicaID, epoch: [UInt8], protocolVersion: UInt8, head: UInt64) {
        self.replicaID = replicaID
        self.epoch = epoch
        self.protocolVersion = protocolVersion
        self.head = head
    }
}

extension ReplicaID: Codable {
    public init(from decoder: any Decoder) throws {
        let hex = try decoder.singleValueContainer().decode(String.self)
        guard let id = ReplicaID(hex: hex) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a replica id"))
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }

    /// Parses 32 hexadecimal digits.
    public init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count == 32 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: 32, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        self.init(bytes: bytes)
    }
}

extension Store {
    /// This replica's identity, epoch and head, for a peer starting a sync.
    public func replicaInfo() throws(ChronicleError) -> ReplicaInfo {
        let engine = try engine
        return try mappingErrors {
            ReplicaInfo(
                replicaID: engine.replica, epoch: try engine.epoch(), protocolVersion: EventRange.protocolVersion,
                head: try engine.head().sequence)
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
        let engine = try engine
        return try mappingErrors {
            Data(try engine.exportRange(after: after, filter: filter, excluding: origin, maxEvents: max(1, maxEvents), maxBytes: maxBytes).encoded())
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

    func importRange(_ range: EventRange, checkpoint: (key: [UInt8], value: UInt64)?) throws(ChronicleError) -> RangeReceipt {
        let engine = try engine
        return try mappingErrors {
            try engine.importRange(range, checkpoint: checkpoint, requireSealedDefaults: configuration.encryptDefaults)
        }
    }

    /// Every syncable event with sequence in `range`, as one range file (for `chronicle export`).
    /// - Throws: ``ChronicleError/invalidArgument(_:)`` when the events do not fit one file (256 MiB); export smaller ranges.
    public func exportFile(sequences range: ClosedRange<UInt64>) throws(ChronicleError) -> Data {
        let engine = try engine
        let cut = try mappingErrors {
            try engine.exportRange(
                after: range.lowerBound > 0 ? range.lowerBound - 1 : 0, filter: .syncable, excluding: nil,
                maxEvents: EventRange.maxItems / 2, maxBytes: EventRange.maxEncodedSize / 2, through: range.upperBound)
        }
        guard cut.upTo >= min(range.upperBound, cut.head) else {
            throw .invalidArgument("sequences \(range.lowerBound)...\(range.upperBound) do not fit one file; export up to \(cut.upTo) first")
        }
        return Data(cut.encoded())
    }
}
