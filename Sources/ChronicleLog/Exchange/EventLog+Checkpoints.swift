package import ChronicleFormat
package import ChronicleLMDB

/// The checkpoints of a log's exchanges with its peers (the `peers` database), by key.
package struct PeerCheckpoints: Sendable {
    let storage: LogStorage

    /// The checkpoint stored under `key` (sequence 0 when none).
    package func value(_ key: CheckpointKey) throws -> CheckpointValue {
        try storage.environment.read { txn in
            try txn.get(storage.dbs.peers, key: key.bytes).flatMap { CheckpointValue(bytes: $0) } ?? .zero
        }
    }

    package func set(_ key: CheckpointKey, to value: CheckpointValue) throws {
        try storage.environment.write { txn in try txn.put(storage.dbs.peers, key: key.bytes, value: value.encoded()) }
    }
}

extension EventLog {
    /// The checkpoints of this log's exchanges.
    package var checkpoints: PeerCheckpoints { PeerCheckpoints(storage: storage) }

    /// This log's epoch: renewed whenever its sequence numbers are rewritten.
    package func epoch() throws -> LogEpoch {
        try environment.read { txn in try Self.epoch(txn, dbs) }
    }

    package static func epoch(_ txn: borrowing Transaction, _ dbs: Databases) throws -> LogEpoch {
        guard let bytes = try txn.get(dbs.meta, key: MetaKey.epoch) else { return .zero }
        guard let epoch = LogEpoch(bytes: bytes) else {
            throw ChronicleError.corruptMeta(entry: "epoch", reason: "\(bytes.count) bytes, not \(LogEpoch.byteCount)")
        }
        return epoch
    }

    /// The chain hash of the record at `sequence` (zeros for 0, or a sequence not in the log).
    package func chainHash(at sequence: UInt64, _ txn: borrowing Transaction) throws -> [UInt8] {
        try storage.chainHash(at: sequence, txn)
    }

    package func chainHash(at sequence: UInt64) throws -> [UInt8] {
        try environment.read { txn in try chainHash(at: sequence, txn) }
    }
}

extension LogStorage {
    /// The chain hash of the record at `sequence` (zeros for 0, or a sequence not in the log).
    func chainHash(at sequence: UInt64, _ txn: borrowing Transaction) throws -> [UInt8] {
        guard sequence > 0, let bytes = try txn.get(dbs.events, key: sequence.bigEndianBytes), bytes.count > LogRecord.hashLength else {
            return LogHead.empty.chain
        }
        return Array(bytes.suffix(LogRecord.hashLength))
    }
}
