/// The value of a replication checkpoint in the `peers` database:
///
/// ```
/// u64   the last sequence acknowledged
/// [32]  the chain hash of the record at that sequence in the log it counts
///       (absent in checkpoints written by format 1: then it is not checked)
/// ```
///
/// The chain hash lets a checkpoint notice that the log under it changed: a peer
/// restored from a backup, or rolled back by a power cut, that wrote new records
/// under old sequence numbers. A checkpoint whose hash no longer matches restarts
/// from zero (identities make a restart safe, only slower).
struct CheckpointValue: Sendable, Equatable {
    var sequence: UInt64
    var chain: [UInt8]?

    static let zero = CheckpointValue(sequence: 0, chain: nil)

    func encoded() -> [UInt8] { sequence.bigEndianBytes + (chain ?? []) }

    init(sequence: UInt64, chain: [UInt8]?) {
        self.sequence = sequence
        self.chain = chain
    }

    init?(bytes: [UInt8]) {
        switch bytes.count {
        case 8:
            guard let sequence = UInt64(bigEndianBytes: bytes) else { return nil }
            self.init(sequence: sequence, chain: nil)
        case 8 + LogRecord.hashLength:
            guard let sequence = UInt64(bigEndianBytes: Array(bytes.prefix(8))) else { return nil }
            self.init(sequence: sequence, chain: Array(bytes.suffix(LogRecord.hashLength)))
        default:
            return nil
        }
    }
}
