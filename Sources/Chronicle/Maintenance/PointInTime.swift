import ChronicleFormat
public import Foundation

/// A point in a log, for point-in-time copies.
public enum PointInTime: Sendable, Equatable {
    /// Every record up to and including this local sequence.
    case sequence(UInt64)
    /// Every event whose logical-clock time is at or before this date.
    case date(Date)
    /// The whole log.
    case end
}
