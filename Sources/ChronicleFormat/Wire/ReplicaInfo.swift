import Foundation

/// A replica's identity as a peer sees it at the start of a sync.
public struct ReplicaInfo: Sendable, Equatable, Codable {
    /// The replica id.
    public var replicaID: ReplicaID
    /// The log epoch: renewed whenever the log's sequence numbers are rewritten.
    public var epoch: LogEpoch
    /// The range protocol version the replica speaks.
    public var protocolVersion: UInt8
    /// The replica's last log sequence.
    public var head: UInt64
    /// The origin of the events the replica writes now (its current writer), if it has one:
    /// a peer need not send those back. `nil` for a mailbox or an older peer.
    public var writer: ReplicaID?
    /// Whether the replica keeps a log of positions whose chain hashes never change, though it
    /// names no writer (a hub): a pusher that finds its head below where its last push left it,
    /// or another chain hash there, knows it lost what was pushed (restored from an older
    /// backup) and pushes again. `false` for a mailbox, whose positions are files that come and
    /// go, and for an older peer. A replica that names its writer keeps a log anyway.
    public var keepsLog: Bool
    /// How far the replica holds what the asking device pushed, per log and filter it pushed
    /// (a hub records this as it appends, so a restore brings back an older mark): a pusher whose
    /// checkpoint is past its mark pushes again from the mark, only what the replica lacks.
    /// `nil` when the replica keeps no marks (a store, a mailbox, an older hub); empty when it
    /// keeps them and holds none for this device.
    public var pushMarks: [PushMark]?

    /// Creates an info value that names no push marks.
    public init(
        replicaID: ReplicaID, epoch: LogEpoch, protocolVersion: UInt8, head: UInt64, writer: ReplicaID? = nil, keepsLog: Bool = false
    ) {
        self.init(replicaID: replicaID, epoch: epoch, protocolVersion: protocolVersion, head: head, writer: writer, keepsLog: keepsLog, pushMarks: nil)
    }

    /// Creates an info value.
    public init(
        replicaID: ReplicaID, epoch: LogEpoch, protocolVersion: UInt8, head: UInt64, writer: ReplicaID?, keepsLog: Bool,
        pushMarks: [PushMark]?
    ) {
        self.replicaID = replicaID
        self.epoch = epoch
        self.protocolVersion = protocolVersion
        self.head = head
        self.writer = writer
        self.keepsLog = keepsLog
        self.pushMarks = pushMarks
    }

    /// The sequence of `replica`'s log (of `epoch`) up to which the replica holds everything
    /// `filter` admits that the asking device pushed: `nil` when the replica keeps no marks, 0
    /// when it keeps none for that log and filter.
    public func pushMark(of replica: ReplicaID, epoch: LogEpoch, filter: RangeFilter) -> UInt64? {
        pushMarkWithChain(of: replica, epoch: epoch, filter: filter)?.upTo
    }

    /// ``pushMark(of:epoch:filter:)`` with the pushing log's chain hash there, when the replica
    /// says it: a pusher whose own log has another hash there (restored from its own backup,
    /// written again under old sequences) pushes from 0.
    public func pushMarkWithChain(of replica: ReplicaID, epoch: LogEpoch, filter: RangeFilter) -> (upTo: UInt64, chain: [UInt8]?)? {
        guard let pushMarks else { return nil }
        guard let mark = pushMarks.first(where: { $0.source == replica && $0.epoch == epoch && $0.filter == filter }) else { return (0, nil) }
        return (mark.upTo, mark.chain)
    }

    private enum CodingKeys: String, CodingKey {
        case replicaID, epoch, protocolVersion, head, writer, keepsLog, pushMarks
    }

    /// Decodes an info value; one encoded before `keepsLog` existed reads as `false`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        replicaID = try container.decode(ReplicaID.self, forKey: .replicaID)
        epoch = try container.decode(LogEpoch.self, forKey: .epoch)
        protocolVersion = try container.decode(UInt8.self, forKey: .protocolVersion)
        head = try container.decode(UInt64.self, forKey: .head)
        writer = try container.decodeIfPresent(ReplicaID.self, forKey: .writer)
        keepsLog = try container.decodeIfPresent(Bool.self, forKey: .keepsLog) ?? false
        pushMarks = try container.decodeIfPresent([PushMark].self, forKey: .pushMarks)
    }
}

/// What a replica that keeps push marks (the hub) holds of one log a device pushed to it: every
/// event of `source`'s log of `epoch` up to sequence `upTo` that `filter` admits
/// (docs/FORMAT.md 7.5 and 13).
public struct PushMark: Sendable, Equatable, Codable {
    /// The pushing replica.
    public var source: ReplicaID
    /// Its log's epoch.
    public var epoch: LogEpoch
    /// The filter its pushes used.
    public var filter: RangeFilter
    /// The sequence up to which the replica holds what those pushes carried, without a gap.
    public var upTo: UInt64
    /// The pushing log's chain hash at `upTo`, as the push that moved the mark there said.
    public var chain: [UInt8]?

    /// Creates a mark.
    public init(source: ReplicaID, epoch: LogEpoch, filter: RangeFilter, upTo: UInt64, chain: [UInt8]? = nil) {
        self.source = source
        self.epoch = epoch
        self.filter = filter
        self.upTo = upTo
        self.chain = chain
    }

    private enum CodingKeys: String, CodingKey {
        case source, epoch, filter, upTo, chain
    }

    /// Decodes a mark; its filter is written as the `filter` of a range request (`syncable`, `small:BYTES`).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        source = try container.decode(ReplicaID.self, forKey: .source)
        epoch = try container.decode(LogEpoch.self, forKey: .epoch)
        let text = try container.decode(String.self, forKey: .filter)
        guard let filter = WireFormat.filter(text) else {
            throw DecodingError.dataCorruptedError(forKey: .filter, in: container, debugDescription: "not a range filter: \(text)")
        }
        self.filter = filter
        upTo = try container.decode(UInt64.self, forKey: .upTo)
        chain = try container.decodeIfPresent(String.self, forKey: .chain).flatMap { [UInt8](hexString: $0) }
    }

    /// Encodes a mark, its filter as text.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(source, forKey: .source)
        try container.encode(epoch, forKey: .epoch)
        try container.encode(WireFormat.text(filter), forKey: .filter)
        try container.encode(upTo, forKey: .upTo)
        try container.encodeIfPresent(chain?.hexString, forKey: .chain)
    }
}
