import ChronicleFormat
public import Foundation

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
