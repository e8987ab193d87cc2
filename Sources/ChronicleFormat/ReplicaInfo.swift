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

    /// Creates an info value.
    public init(replicaID: ReplicaID, epoch: LogEpoch, protocolVersion: UInt8, head: UInt64, writer: ReplicaID? = nil) {
        self.replicaID = replicaID
        self.epoch = epoch
        self.protocolVersion = protocolVersion
        self.head = head
        self.writer = writer
    }
}
