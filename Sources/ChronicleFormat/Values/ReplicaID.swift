import ChronicleSodium

/// A replica's identity: 16 random bytes, fixed when the store is created
/// (and renewed when a store is copied).
public struct ReplicaID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The 16 bytes.
    public let bytes: [UInt8]

    package init?(bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// A fresh random id.
    package static func random() -> ReplicaID {
        ReplicaID(uncheckedBytes: Sodium.randomBytes(16))
    }

    private init(uncheckedBytes: [UInt8]) { self.bytes = uncheckedBytes }

    /// All zeros: no replica (the origin of a change not yet committed).
    package static let none = ReplicaID(uncheckedBytes: [UInt8](repeating: 0, count: 16))

    public static func < (lhs: ReplicaID, rhs: ReplicaID) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }

    /// Lowercase hexadecimal.
    public var hex: String { bytes.hexString }

    /// The first 8 hex digits, enough to tell replicas apart in a listing.
    public var short: String { String(hex.prefix(8)) }

    public var description: String { hex }
}
