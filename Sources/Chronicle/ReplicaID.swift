import Sodium

/// A replica's identity: 16 random bytes, fixed when the store is created
/// (and renewed when a store is copied).
public struct ReplicaID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The 16 bytes.
    public let bytes: [UInt8]

    init?(bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// A fresh random id.
    static func random() -> ReplicaID {
        ReplicaID(uncheckedBytes: Sodium.randomBytes(16))
    }

    private init(uncheckedBytes: [UInt8]) { self.bytes = uncheckedBytes }

    public static func < (lhs: ReplicaID, rhs: ReplicaID) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }

    /// Lowercase hexadecimal.
    public var hex: String { bytes.map { String(format2: $0) }.joined() }

    /// The first 8 hex digits, enough to tell replicas apart in a listing.
    public var short: String { String(hex.prefix(8)) }

    public var description: String { hex }
}

extension String {
    /// Two lowercase hex digits.
    init(format2 byte: UInt8) {
        let digits = Array("0123456789abcdef")
        self = String([digits[Int(byte >> 4)], digits[Int(byte & 0x0f)]])
    }
}

/// A hybrid logical clock reading: 48 bits of Unix milliseconds, 16 bits of logical counter.
///
/// Readings are totally ordered, advance on every local event (even when the
/// wall clock steps back) and on every received event, so "last writer" means
/// causally last, not "the device with the fastest clock".
public struct HLC: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The packed value: `milliseconds << 16 | logical`.
    public let rawValue: UInt64

    /// Creates a reading from its packed value.
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Milliseconds since 1970-01-01 UTC.
    public var milliseconds: UInt64 { rawValue >> 16 }
    /// The logical counter within the millisecond.
    public var logical: UInt16 { UInt16(truncatingIfNeeded: rawValue) }

    /// The reading that follows `previous` at wall-clock time `nowMilliseconds`.
    static func next(after previous: HLC, nowMilliseconds: UInt64) -> HLC {
        let physical = (nowMilliseconds & 0xFFFF_FFFF_FFFF) << 16
        return HLC(rawValue: max(previous.rawValue &+ 1, physical))
    }

    public static func < (lhs: HLC, rhs: HLC) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { "\(milliseconds).\(logical)" }
}
