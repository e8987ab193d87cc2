import ChronicleSodium

/// What ``Store/verify(progress:)`` found.
public struct VerificationReport: Sendable, Equatable, CustomStringConvertible {
    /// The number of log records checked.
    public var records: Int
    /// The number of keys in the views.
    public var keys: Int
    /// The first problem found, or `nil` when the store is sound.
    public var firstProblem: ChronicleError?
    /// The sequence of the first bad record, when the problem is in the log.
    public var firstBadSequence: UInt64?

    /// `true` when every record decodes, the hash chain holds and the views equal a replay.
    public var isSound: Bool { firstProblem == nil }

    public var description: String {
        if let firstProblem { return "FAILED after \(records) records: \(firstProblem)" }
        return "ok: \(records) records, \(keys) keys, hash chain intact, views equal a replay"
    }

    /// The report of a store that an opening refused for damage (``ChronicleError/isDamage``):
    /// nothing was checked past it.
    package init(refusedOpening damage: ChronicleError) {
        var sequence: UInt64?
        switch damage {
        case let .corruptRecord(at, _): sequence = at
        case let .tampered(at, _): sequence = at
        default: break
        }
        self.init(records: 0, keys: 0, firstProblem: damage, firstBadSequence: sequence)
    }

    package init(records: Int, keys: Int, firstProblem: ChronicleError? = nil, firstBadSequence: UInt64? = nil) {
        self.records = records
        self.keys = keys
        self.firstProblem = firstProblem
        self.firstBadSequence = firstBadSequence
    }
}
