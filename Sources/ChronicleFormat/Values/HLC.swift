import ChronicleSodium

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
    package static func next(after previous: HLC, nowMilliseconds: UInt64) -> HLC {
        let physical = (nowMilliseconds & 0xFFFF_FFFF_FFFF) << 16
        return HLC(rawValue: max(previous.rawValue &+ 1, physical))
    }

    /// The reading of an imported value (UserDefaults, a property list): before every reading a
    /// clock gives (0 ms, logical 1), so an import loses to every change made anywhere in the
    /// sync group, whenever it meets it. Two imports of one key compare by writer, as usual.
    public static let imported = HLC(rawValue: 1)

    public static func < (lhs: HLC, rhs: HLC) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { "\(milliseconds).\(logical)" }
}
