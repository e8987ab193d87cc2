package import ChronicleFormat
import ChronicleLMDB

/// Reading: view entries (a queued change of this process first), history, the head.
extension EventLog {
    /// The view entry of a key, or `nil` when the key was never written.
    /// A change queued by a non-throwing form and not yet committed comes first: this process
    /// reads its own writes at once.
    package func entry(_ domain: Domain, _ name: String) throws -> ViewEntry? {
        if let pending = local.pendingEntry(domain, name) { return pending }
        return try committedEntry(domain, name)
    }

    /// The key's committed view entry (not what the non-throwing forms queued).
    package func committedEntry(_ domain: Domain, _ name: String) throws -> ViewEntry? {
        try environment.read { txn in
            guard let bytes = try txn.get(dbs.view(domain), key: Array(name.utf8)) else { return nil }
            return try ViewEntry.decoding(bytes, key: name)
        }
    }

    /// The view entry of a key and the id of the transaction it was read in.
    package func entryAndSnapshot(_ domain: Domain, _ name: String) throws -> (ViewEntry?, Int) {
        try environment.read { txn in
            let entry = try txn.get(dbs.view(domain), key: Array(name.utf8)).map { bytes throws(ChronicleError) in
                try ViewEntry.decoding(bytes, key: name)
            }
            return (entry, txn.id)
        }
    }

    /// The events of a key that its retention keeps, oldest first in the conflict order, with
    /// their local sequences: exactly what the automatic compaction leaves, whether or not it
    /// has run since the last write.
    package func history(_ domain: Domain, _ name: String) throws -> [CommittedEvent] {
        try environment.read { txn in
            let retention = try retentionPlanner.retention(ofPrefix: HistoryKey.prefix(domain: domain, name: name), txn)
            let events = try retentionPlanner.retainedSequences(domain, name, keeping: retention, txn).map { sequence in
                guard let bytes = try txn.get(dbs.events, key: sequence.bigEndianBytes) else {
                    throw ChronicleError.corruptRecord(sequence: sequence, reason: "indexed in history but missing from the log")
                }
                let event = try LogRecord(decoding: bytes, sequence: sequence).event(sequence: sequence)
                guard event.domain == domain, event.key.utf8.elementsEqual(name.utf8) else {  // by bytes, as the store keeps names
                    throw ChronicleError.corruptViewEntry(key: name, reason: "its history index names record \(sequence), an event of another key")
                }
                return CommittedEvent(sequence: sequence, event: event)
            }
            // Oldest first in the conflict order (HLC, origin, counter): the same on every replica,
            // whatever order the events arrived in.
            return events.sorted { $0.event.order < $1.event.order }
        }
    }

    /// The log head as last committed.
    package func head() throws -> LogHead {
        try environment.read { txn in try LogHead.read(txn, dbs) }
    }
}
