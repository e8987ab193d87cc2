import ChronicleFormat
import Foundation
import Logging

/// What a sync did with each peer.
public struct SyncReport: Sendable, Equatable {
    /// One peer's part of a sync.
    public struct PeerReport: Sendable, Equatable {
        /// The peer's name.
        public var peer: String
        /// Events pushed to the peer.
        public var sent: Int = 0
        /// What the peer reported applying of the pushed events.
        public var pushed = RangeReceipt()
        /// What this replica did with the events it pulled.
        public var pulled = RangeReceipt()
        /// Ranges exchanged (both directions).
        public var batches: Int = 0
    }

    /// One report per peer that completed.
    public var peers: [PeerReport] = []

    /// Events received from all peers.
    public var received: Int { peers.reduce(0) { $0 + $1.pulled.received } }
    /// Events new to this replica.
    public var applied: Int { peers.reduce(0) { $0 + $1.pulled.applied } }
    /// Events sent to all peers.
    public var sent: Int { peers.reduce(0) { $0 + $1.sent } }
    /// Received events this replica already had.
    public var duplicates: Int { peers.reduce(0) { $0 + $1.pulled.duplicates } }
    /// Received events held back by the clock-drift guard.
    public var deferred: Int { peers.reduce(0) { $0 + $1.pulled.deferred } }
    /// Received events and keys this replica set aside (see ``Store/quarantinedItems()``).
    public var quarantined: Int { peers.reduce(0) { $0 + $1.pulled.quarantined } }
    /// Pushed events and keys the peers set aside: they do not take this replica's changes
    /// (a different key source, or an older event of the same identity).
    public var refusedByPeers: Int { peers.reduce(0) { $0 + $1.pushed.quarantined } }
}

extension SyncReport: CustomStringConvertible {
    /// One line per peer: what went each way, in words.
    public var description: String {
        guard !peers.isEmpty else { return "SyncReport(no peers)" }
        return peers.map(\.description).joined(separator: "\n")
    }
}

extension SyncReport.PeerReport: CustomStringConvertible {
    /// `peer: sent N, received N (applied N, duplicates N, held back N, quarantined N), refused by the peer N`.
    public var description: String {
        "\(peer): sent \(sent), received \(pulled.received) (applied \(pulled.applied), duplicates \(pulled.duplicates), "
            + "held back \(pulled.deferred), quarantined \(pulled.quarantined)), refused by the peer \(pushed.quarantined)"
    }
}
