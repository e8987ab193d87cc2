import ChronicleFormat
import ChronicleLog
import Foundation

extension Replicator {
    /// Asks `peer` for the events this store lost before it could apply them (its quarantine
    /// evicted them while they waited for a key it now holds) and imports what the peer has.
    /// An identity the peer answered is forgotten whatever the import does with it; one it did
    /// not is asked again at later syncs, a bounded number of times (``WantedEvents``).
    func askForLostEvents(from peer: Peer, source: String, into report: inout SyncReport.PeerReport) async throws {
        let store = store
        let eventLog = try store.eventLog
        let wanted = try await BlockingWork.run { try eventLog.dueWantedEvents() }
        guard !wanted.isEmpty, let answer = try await peer.transport.pullEvents(wanted) else { return }
        let range = try EventRange(decoding: Array(answer))
        let asked = Set(wanted)
        let answered = Set(range.events.map { EventIdentity(writer: $0.origin, counter: $0.counter) }).intersection(asked)
        let receipt = try await BlockingWork.run { () throws -> RangeReceipt in
            let receipt = try store.importRange(range, checkpoint: nil, source: "\(source), asked by identity")
            try eventLog.forgetWantedEvents(answered)
            return receipt
        }
        report.pulled.add(receipt)
    }
}
