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
    /// Events and wrapped keys set aside in the quarantine (failed validation or authentication).
    public var quarantined: Int = 0
    /// Events of a newer format: stored and relayed, not applied.
    public var opaque: Int = 0

    /// Creates an empty receipt.
    public init() {}

    /// Adds another receipt's counts to this one.
    public mutating func add(_ other: RangeReceipt) {
        received += other.received
        applied += other.applied
        duplicates += other.duplicates
        deferred += other.deferred
        keys += other.keys
        quarantined += other.quarantined
        opaque += other.opaque
    }

    private enum CodingKeys: String, CodingKey {
        case received, applied, duplicates, deferred, keys, quarantined, opaque
    }

    /// Decodes a receipt; counts a peer of an earlier version does not send read as 0.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func count(_ key: CodingKeys) throws -> Int { try container.decodeIfPresent(Int.self, forKey: key) ?? 0 }
        received = try count(.received)
        applied = try count(.applied)
        duplicates = try count(.duplicates)
        deferred = try count(.deferred)
        keys = try count(.keys)
        quarantined = try count(.quarantined)
        opaque = try count(.opaque)
    }
}
