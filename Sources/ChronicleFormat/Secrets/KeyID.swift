import ChronicleSodium

/// The id of a data key: 16 random bytes.
///
/// Held inline as two big-endian words: every authenticated event names one, so a received
/// event's key id is parsed, compared and hashed without an allocation.
package struct KeyID: Sendable, Hashable, CustomStringConvertible {
    package static let length = 16
    private let high: UInt64
    private let low: UInt64

    /// The id whose bytes are `bytes`, or `nil` when they are not 16.
    package init?(bytes: some Collection<UInt8>) {
        guard bytes.count == Self.length else { return nil }
        // Contiguous bytes (an array, a slice, a value read from the log) load as two words: the
        // byte-by-byte loop below runs unspecialized across modules, and a member's every write
        // reads its active key id.
        if let id = bytes.withContiguousStorageIfAvailable({ KeyID(loading: UnsafeRawBufferPointer($0), at: 0) }) {
            self = id
            return
        }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (index, byte) in bytes.enumerated() {
            if index < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
        }
        self.high = high
        self.low = low
    }

    /// The id in the 16 bytes at `offset` of `buffer`; the caller has checked that they are there.
    package init(loading buffer: UnsafeRawBufferPointer, at offset: Int) {
        high = UInt64(bigEndian: buffer.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
        low = UInt64(bigEndian: buffer.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
    }

    /// The id stored in a `meta` entry (or a key of one) named `entry`.
    package init(metaEntry entry: String, _ bytes: some Collection<UInt8>) throws(ChronicleError) {
        guard let id = KeyID(bytes: bytes) else { throw ChronicleError.corruptMeta(entry: entry, reason: "\(bytes.count) bytes, not \(Self.length)") }
        self = id
    }

    package static func random() -> KeyID {
        Sodium.randomBytes(length).withUnsafeBytes { KeyID(loading: $0, at: 0) }
    }

    package var bytes: [UInt8] { high.bigEndianBytes + low.bigEndianBytes }

    /// Appends the 16 bytes.
    package func write(to writer: inout ByteWriter) {
        writer.u64(high)
        writer.u64(low)
    }

    package var description: String { bytes.prefix(4).hexString }
}
