import ChronicleFormat
import ChronicleLog

/// A store's log copied into a new store (``Store/copy(to:through:progress:)``): its wrapped
/// data keys, then its events up to a point, in ranges, as an import that verifies nothing (the
/// source's own log), so the copy keeps every event's origin, clock and policy.
struct LogCopy {
    /// The log copied from.
    let source: EventLog
    /// Where it is, for the copy's imports' source.
    let sourcePath: String
    /// The new store, empty.
    let target: Store

    /// Copies the keys, then the events through `point`, calling `progress` with (records done, records in all).
    func copy(through point: PointInTime, progress: (@Sendable (UInt64, UInt64) -> Void)?) throws(ChronicleError) {
        let targetLog = try target.eventLog
        try mappingErrors {
            try source.keyRecords.copyWrappedKeys(to: targetLog.keyRecords)
            let total = try source.head().sequence
            var last: UInt64 = 0
            switch point {
            case let .sequence(limit): last = min(limit, total)
            case .date, .end: last = total
            }
            var after: UInt64 = 0
            while after < last {
                var range = try source.rangeExport.exportRange(after: after, filter: nil, excluding: nil, maxEvents: 4096, maxBytes: 8 << 20, through: last)
                if case let .date(date) = point {
                    let limit = UnixMilliseconds.of(date)
                    range.events.removeAll { $0.hlc.milliseconds > limit }
                }
                _ = try target.importRange(range, checkpoint: nil, source: "a copy of \(sourcePath)", verify: false)
                guard range.upTo > after else { break }
                after = range.upTo
                progress?(after, last)
            }
        }
    }
}
