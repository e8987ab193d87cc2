import ChronicleFormat
import ChronicleLog
import Foundation
import Logging

extension Replicator {
    /// Asks `peer` for the events this store lost before it could apply them (its quarantine
    /// evicted them while they waited for a key it now holds) and imports what the peer has.
    /// An identity is forgotten once the log holds it, or after a bounded number of answers
    /// without it from peers that had room for it (``WantedEvents``); a peer that cannot ask, or a request that fails, costs
    /// nothing and stops nothing: the push goes on.
    func askForLostEvents(from peer: Peer, source: String, into report: inout SyncReport.PeerReport) async {
        let log = replicaLog
        do {
            let wanted = try await BlockingWork.run { try log.wantedEvents() }
            guard !wanted.isEmpty, let answer = try await peer.transport.answerEvents(wanted) else { return }
            let range = try EventRange(decoding: Array(answer.range))
            let receipt = try await BlockingWork.run {
                try log.importAnswer(range, to: wanted, whole: answer.answeredWhole, source: "\(source), asked by identity")
            }
            report.pulled.add(receipt)
        } catch {
            store.configuration.logger.warning(
                "chronicle: asking a peer again for lost events failed; the next sync asks again",
                metadata: ["peer": "\(peer.name)", "error": "\(ChronicleError.wrap(error))"])
        }
    }
}
