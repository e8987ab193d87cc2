import ChronicleSodium

/// The anchor a compaction writes as record 1 of the rewritten log.
///
/// ```
/// u8    version (1)
/// [16]  epoch of the log before compaction
/// u64   head sequence before compaction
/// [32]  chain hash at that head
/// u64   number of events dropped
/// u64   compaction time, Unix ms
/// ```
package struct Anchor: Sendable, Equatable {
    package var previousEpoch: LogEpoch
    package var previousHead: UInt64
    package var previousChain: [UInt8]
    package var dropped: UInt64
    package var time: UInt64

    package func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 80)
        writer.u8(1)
        writer.raw(previousEpoch.bytes)
        writer.u64(previousHead)
        writer.raw(previousChain)
        writer.u64(dropped)
        writer.u64(time)
        return writer.bytes
    }

    package init(previousEpoch: LogEpoch, previousHead: UInt64, previousChain: [UInt8], dropped: UInt64, time: UInt64) {
        self.previousEpoch = previousEpoch
        self.previousHead = previousHead
        self.previousChain = previousChain
        self.dropped = dropped
        self.time = time
    }

    package init(decoding bytes: [UInt8]) throws(DecodeFailure) {
        var reader = ByteReader(bytes)
        guard try reader.u8() == 1 else { throw DecodeFailure(description: "unknown anchor version") }
        guard let epoch = LogEpoch(bytes: try reader.raw(LogEpoch.byteCount)) else { throw DecodeFailure(description: "bad epoch") }
        previousEpoch = epoch
        previousHead = try reader.u64()
        previousChain = try reader.raw(32)
        dropped = try reader.u64()
        time = try reader.u64()
        try reader.expectEnd()
    }
}
