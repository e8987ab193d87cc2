package import ChronicleSodium

/// The record that stands for a run of records that retention dropped from the log
/// (docs/FORMAT.md 4.1, 4.5), stored under the run's last sequence:
///
/// ```
/// u8    version (1)
/// u64   first sequence of the run (the last is the record's own sequence)
/// [32]  chain hash before the run: that of record first − 1 (zeros when first is 1)
/// [32]  MAC = BLAKE2b-256(key: chain subkey of the head's chain key, or unkeyed,
///             "chronicle.gap.v1" ‖ u64 first ‖ u64 last ‖ [32] chain before ‖ [32] chain at last)
/// ```
///
/// The record's chain-hash field holds the chain hash the run's last record had, so the
/// record after the gap verifies as before, and the sequences of kept records never change.
package struct Gap: Sendable, Equatable {
    package static let version: UInt8 = 1
    package static let bodyLength = 1 + 8 + 32 + 32

    package var first: UInt64
    package var chainBefore: [UInt8]
    package var mac: [UInt8]

    package init(first: UInt64, chainBefore: [UInt8], mac: [UInt8]) {
        self.first = first
        self.chainBefore = chainBefore
        self.mac = mac
    }

    package func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: Self.bodyLength)
        writer.u8(Self.version)
        writer.u64(first)
        writer.raw(chainBefore)
        writer.raw(mac)
        return writer.bytes
    }

    package init(decoding bytes: [UInt8]) throws(DecodeFailure) {
        guard bytes.count == Self.bodyLength else { throw DecodeFailure(description: "a gap of \(bytes.count) bytes, not \(Self.bodyLength)") }
        var reader = ByteReader(bytes)
        guard try reader.u8() == Self.version else { throw DecodeFailure(description: "unknown gap version \(bytes[0])") }
        first = try reader.u64()
        chainBefore = try reader.raw(32)
        mac = try reader.raw(32)
    }

    /// Whether this gap's MAC is the one `key` makes for it, stored under `last` with chain hash
    /// `chainAtLast` (compared in constant time).
    package func macVerifies(key: KeyedHash?, last: UInt64, chainAtLast: [UInt8]) -> Bool {
        Sodium.constantTimeEqual(Self.mac(key: key, first: first, last: last, chainBefore: chainBefore, chainAtLast: chainAtLast), mac)
    }

    /// The MAC of a gap over `first...last`, keyed with the head's chain key when the log is keyed.
    package static func mac(key: KeyedHash?, first: UInt64, last: UInt64, chainBefore: [UInt8], chainAtLast: [UInt8]) -> [UInt8] {
        let parts = [Array("chronicle.gap.v1".utf8), first.bigEndianBytes, last.bigEndianBytes, chainBefore, chainAtLast]
        if let key { return key.hash(parts) }
        var output = [UInt8](repeating: 0, count: LogRecord.hashLength)
        output.withUnsafeMutableBytes { output in
            KeyedHash.unkeyed(into: output) { absorber in for part in parts { absorber.absorb(part) } }
        }
        return output
    }
}
