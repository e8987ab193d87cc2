public import Foundation

/// How a ``Replicator`` talks to one peer.
///
/// A transport moves encoded ranges (the versioned binary format of
/// ``Store/exportRange(after:filter:excludingOrigin:maxEvents:maxBytes:)``);
/// it never interprets or alters them. Every transport must pass the
/// conformance suite in `ChronicleTesting`.
public protocol SyncTransport: Sendable {
    /// The remote replica's identity, log epoch, protocol version and head.
    func info() async throws -> ReplicaInfo

    /// A range of the remote's log after `after`, leaving out events made by `origin`:
    /// at most `maxEvents` events (the remote may send fewer, never none while any is left).
    func pull(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) async throws -> Data

    /// Delivers an encoded range; returns only after the remote applied it durably.
    func push(_ range: Data) async throws -> RangeReceipt
}

/// A replication peer: a name for reports and logs, and a transport.
public struct Peer: Sendable, CustomStringConvertible {
    /// A name for reports and logs.
    public let name: String
    /// How to reach the peer.
    public let transport: any SyncTransport

    /// A peer reached through any transport.
    public init(name: String, transport: any SyncTransport) {
        self.name = name
        self.transport = transport
    }

    public var description: String { name }

    /// Another store in this process.
    public static func store(_ store: Store) -> Peer {
        Peer(name: "store \(store.directory.lastPathComponent)", transport: StoreTransport(store: store))
    }

    /// A shared folder used as a mailbox of range files (a synced drive, a USB stick).
    public static func directory(_ url: URL) -> Peer {
        Peer(name: "directory \(url.path)", transport: DirectoryTransport(directory: url))
    }
}

/// Replicates with another ``Store`` in the same process.
public struct StoreTransport: SyncTransport {
    /// The remote store.
    public let store: Store

    /// Creates a transport to `store`.
    public init(store: Store) { self.store = store }

    public func info() async throws -> ReplicaInfo { try store.replicaInfo() }

    public func pull(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) async throws -> Data {
        try store.exportRange(after: after, filter: filter, excludingOrigin: origin, maxEvents: min(maxEvents, 4096))
    }

    public func push(_ range: Data) async throws -> RangeReceipt {
        try store.importRange(range)
    }
}
