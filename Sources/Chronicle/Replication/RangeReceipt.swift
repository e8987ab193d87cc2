import Foundation

/// What an import did.
public struct RangeReceipt: Sendable, Equatable, Codable {
    /// Events in the range.
    public var received: Int = 0
    /// Events new to this replica, appended to its log.
    public var applied: Int = 0
    /// Events this replica already had (re-sent ranges are harmless).
    public var duplicates: Int = 0
    /// Events stamped beyond the clock-drift guard: stored and relayed, kept out of the views for now.
    public var deferred: Int = 0
    /// Wrapped data keys new to this replica.
    public var keys: Int = 0

    /// Creates an empty receipt.
    public init() {}

    /// Adds another receipt's counts to this one.
    public mutating func add(_ other: RangeReceipt) {
        received += other.received
        applied += other.applied
        duplicates += other.duplicates
        deferred += other.deferred
        keys += other.keys
    }
}
