import Foundation
import ChronicleSodium

/// What ``Store/compact(before:tombstoneRetention:)`` did.
public struct CompactionReport: Sendable, Equatable {
    /// Log records before compaction.
    public var recordsBefore: Int
    /// Events dropped (their dots are kept, so they are never imported again).
    public var dropped: Int
    /// Events kept.
    public var kept: Int
    /// The highest sequence every known peer had acknowledged (events after it were kept).
    public var acknowledgedThrough: UInt64?
}
