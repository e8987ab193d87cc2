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

    /// Creates an info value.
    public init(
        replicaID: ReplicaID, epoch: LogEpoch, protocolVersion: UInt8, head: UInt64, writer: ReplicaID? = nil, keepsLog: Bool = false
    ) {
        self.replicaID = replicaID
        self.epoch = epoch
        self.protocolVersion = protocolVersion
        self.head = head
        self.writer = writer
        self.keepsLog = keepsLog
    }

    private enum CodingKeys: String, CodingKey {
        case replicaID, epoch, protocolVersion, head, writer, keepsLog
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
    }
}
