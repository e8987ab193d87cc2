/// The value of a replication checkpoint in the `peers` database:
///
/// ```
/// u64   the last sequence acknowledged
/// [32]  the chain hash of the record at that sequence in the log it counts
///       (absent in checkpoints written by format 1, zeros for none: then it is not checked)
/// u64   push checkpoints, optional: the remote's head after the last push
/// [32]  and the chain hash of the remote's record there
/// ```
///
/// The chain hash lets a checkpoint notice that the log under it changed: a peer
/// restored from a backup, or rolled back by a power cut, that wrote new records
/// under old sequence numbers. A checkpoint whose hash no longer matches restarts
/// from zero (identities make a restart safe, only slower).
package struct CheckpointValue: Sendable, Equatable {
    package var sequence: UInt64
    package var chain: [UInt8]?
    /// Push checkpoints: the remote's head after the last push, and the chain hash there.
    package var remoteHead: UInt64?
    package var remoteChain: [UInt8]?

    package static let zero = CheckpointValue(sequence: 0, chain: nil)

    package func encoded() -> [UInt8] {
        var bytes = sequence.bigEndianBytes + (chain ?? LogRecord.noChain)
        if let remoteHead, let remoteChain { bytes += remoteHead.bigEndianBytes + remoteChain }
        return bytes
    }

    package init(sequence: UInt64, chain: [UInt8]?, remoteHead: UInt64? = nil, remoteChain: [UInt8]? = nil) {
        self.sequence = sequence
        self.chain = chain
        self.remoteHead = remoteHead
        self.remoteChain = remoteChain
    }

    /// A stored chain hash, `nil` for zeros (none).
    private static func hash(_ bytes: [UInt8]) -> [UInt8]? { bytes == LogRecord.noChain ? nil : bytes }

    package init?(bytes: [UInt8]) {
        switch bytes.count {
        case 8:
            guard let sequence = UInt64(bigEndianBytes: bytes) else { return nil }
            self.init(sequence: sequence, chain: nil)
        case 8 + LogRecord.hashLength:
            guard let sequence = UInt64(bigEndianBytes: Array(bytes.prefix(8))) else { return nil }
            self.init(sequence: sequence, chain: Self.hash(Array(bytes.suffix(LogRecord.hashLength))))
        case 2 * (8 + LogRecord.hashLength):
            guard let sequence = UInt64(bigEndianBytes: Array(bytes[0..<8])),
                let remoteHead = UInt64(bigEndianBytes: Array(bytes[40..<48]))
            else { return nil }
            self.init(sequence: sequence, chain: Self.hash(Array(bytes[8..<40])), remoteHead: remoteHead, remoteChain: Array(bytes[48..<80]))
        default:
            return nil
        }
    }
}
