import ChronicleFormat
import ChronicleLog
import Foundation

extension Store {
    /// The log records with sequence in `range`, oldest first (for tools: `chronicle log`).
    ///
    /// Checks the hash chain from the start of the log as it goes.
    public func logEntries(in range: ClosedRange<UInt64> = 1...UInt64.max) throws(ChronicleError) -> [LogEntry] {
        let eventLog = try settledEventLog
        return try mappingErrors {
            let epoch = try eventLog.epoch()
            return try eventLog.inspection.events(in: range).map { LogEntry($0, epoch: epoch) }
        }
    }

    /// Up to `limit` log entries after `sequence`, oldest first, and the last sequence read
    /// (`through`; the next page starts after it). Reads only those records, so a tool pages
    /// through a log of any size in constant memory (`chronicle log`); it does not check the hash
    /// chain, which ``verify(progress:)`` does.
    @_spi(Tools) public func logEntries(after sequence: UInt64, limit: Int) throws(ChronicleError) -> (entries: [LogEntry], through: UInt64) {
        let eventLog = try settledEventLog
        return try mappingErrors {
            let (events, through, epoch) = try eventLog.inspection.events(after: sequence, limit: max(1, limit))
            return (events.map { LogEntry($0, epoch: epoch) }, through)
        }
    }
}

extension Store {
    /// The report of a store that an opening refused for damage (``ChronicleError/isDamage``),
    /// for `chronicle verify`: the damage is the finding, and nothing was checked past it.
    @_spi(Tools) public static func verificationReport(refusedOpening damage: ChronicleError) -> VerificationReport {
        VerificationReport(refusedOpening: damage)
    }
}
