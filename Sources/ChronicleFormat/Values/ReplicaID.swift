import ChronicleSodium

/// A replica's identity: 16 random bytes, fixed when the store is created
/// (and renewed when a store is copied).
public struct ReplicaID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The 16 bytes as two big-endian halves, held inline: an event holds two ids (its origin and
    /// its replica), and as an array each was a heap object that every copy of the event retained
    /// and released, and that reading a view entry's order allocated.
    package let high: UInt64
    package let low: UInt64

    /// The 16 bytes, as a new array (the encoders write the halves in place).
    public var bytes: [UInt8] { high.bigEndianBytes + low.bigEndianBytes }

    package init?(bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.init(uncheckedBytes: bytes)
    }

    /// The id in 16 bytes read in place (a view entry's, a dot's), or `nil` for another count.
    package init?(_ raw: UnsafeRawBufferPointer) {
        guard raw.count == 16 else { return nil }
        high = UInt64(bigEndian: raw.loadUnaligned(as: UInt64.self))
        low = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
    }

    /// A fresh random id.
    package static func random() -> ReplicaID {
        ReplicaID(uncheckedBytes: Sodium.randomBytes(16))
    }

    private init(uncheckedBytes: [UInt8]) {
        (high, low) = uncheckedBytes.withUnsafeBytes { raw in
            (UInt64(bigEndian: raw.loadUnaligned(as: UInt64.self)), UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        }
    }

    private init(high: UInt64, low: UInt64) { (self.high, self.low) = (high, low) }

    /// All zeros: no replica (the origin of a change not yet committed).
    package static let none = ReplicaID(high: 0, low: 0)

    /// The order of the bytes (lexicographic), which is the order of the big-endian halves.
    public static func < (lhs: ReplicaID, rhs: ReplicaID) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }

    /// Lowercase hexadecimal.
    public var hex: String { bytes.hexString }

    /// The first 8 hex digits, enough to tell replicas apart in a listing.
    public var short: String { String(hex.prefix(8)) }

    public var description: String { hex }
}
