package import Foundation

/// Unix time in milliseconds: the unit of the hybrid logical clock and of every time stored on disk.
package enum UnixMilliseconds {
    /// Wall-clock time now.
    package static func now() -> UInt64 { of(Date()) }

    /// `date` in Unix milliseconds (dates before 1970 clamp to 0).
    package static func of(_ date: Date) -> UInt64 {
        let value = date.timeIntervalSince1970 * 1000
        guard value.isFinite, value > 0 else { return 0 }
        return value >= 1.8e19 ? .max : UInt64(value)
    }

    /// `milliseconds` as a `Date`.
    package static func date(_ milliseconds: UInt64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    /// `a + b`, saturating at the largest value instead of trapping (configured drifts and
    /// retentions may be huge).
    package static func adding(_ a: UInt64, to b: UInt64) -> UInt64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? .max : sum
    }

    /// A duration in whole milliseconds (negative durations clamp to 0).
    package static func of(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        let (ms, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1000)
        return overflow ? .max : ms &+ UInt64(attoseconds / 1_000_000_000_000_000)
    }
}
