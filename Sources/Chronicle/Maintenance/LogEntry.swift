import ChronicleFormat
import ChronicleLog
public import Foundation

/// One event of the log: what ``Store/logEntries(in:)`` returns and ``Store/changes(after:)``
/// streams. A sealed value is never exposed.
public struct LogEntry: Sendable, Equatable, CustomStringConvertible {
    /// The local log sequence.
    public let sequence: UInt64
    /// The replica (device) that made the change: its ``Store/replicaID``.
    public let origin: ReplicaID
    /// The writer that made the change: a random id drawn each time a process opened the
    /// store there. With `counter`, the event's identity, which no restore or rollback repeats.
    public let writer: ReplicaID
    /// The per-writer counter (with `writer`, the event's identity).
    public let counter: UInt64
    /// The hybrid logical clock reading.
    public let timestamp: HLC
    /// `"defaults"` or `"secrets"`.
    public let domain: String
    /// The key name. The store tells names apart by their UTF-8 bytes, but `String`'s `==` (and
    /// a dictionary keyed by `String`) calls two spellings equal when Unicode calls them
    /// canonically equivalent ("caf\u{E9}" and "cafe\u{301}", "Key" and "\u{212A}ey"): compare
    /// `key.utf8` when a peer's names matter.
    public let key: String
    /// Set or remove.
    public let operation: ChangeOperation
    /// The event's sync policy.
    public let policy: SyncPolicy
    /// `true` when the payload is sealed.
    public let isSealed: Bool
    /// The encoded payload size in bytes.
    public let size: Int
    /// The value as JSON, for unsealed sets; `nil` for removes and sealed values.
    public let valueJSON: String?
    /// Whether this event was its key's current value when it was read: `false` for an event a
    /// newer one replaced, and for a replicated event that arrived after a newer one (last
    /// writer wins on the clock, not on arrival) or that the drift guard still holds back.
    /// A consumer that keeps values from ``Store/changes(after:)`` applies only current events.
    public let isCurrent: Bool
    /// `true` while the clock-drift guard holds the event back (stamped too far ahead of this
    /// device's clock): it is not current yet. ``Store/changes(after:)`` delivers it again, with
    /// `isHeldBack` false and ``isCurrent`` as it then is, once local time reaches it.
    public let isHeldBack: Bool
    /// The log's epoch when the event was read: renewed whenever the log's sequence numbers are
    /// rewritten (a compaction, a restored or copied store).
    public let epoch: LogEpoch
    /// The hash chain's value at this event's record: with ``epoch`` and ``sequence``, it names
    /// this exact point of this exact log (a rolled-back or restored log reuses sequences, not hashes).
    public let chainHash: [UInt8]

    /// What a consumer of ``Store/changes(after:)`` keeps to resume after this event:
    /// ``Store/changes(from:)`` resumes here when the log still holds this point, and starts
    /// again from the beginning when it does not (after a compaction or a restore). From a
    /// stream, it is the stream's position (a redelivered, once held-back event does not move
    /// it back) and it names the held-back events the stream still owes a redelivery.
    public var checkpoint: LogCheckpoint {
        streamCheckpoint ?? LogCheckpoint(sequence: sequence, epoch: epoch, chainHash: chainHash)
    }
    /// Set by the change stream: its position and the held-back events it still follows.
    var streamCheckpoint: LogCheckpoint?

    /// The value's encoding and payload, for unsealed sets.
    let encoding: UInt8
    let payload: [UInt8]?

    /// The timestamp as wall-clock time.
    public var date: Date { UnixMilliseconds.date(timestamp.milliseconds) }

    /// The value this event set, decoded as `type` (as a key of that type reads it), or `nil`
    /// for a remove.
    ///
    /// ```swift
    /// for await change in store.changes(after: checkpoint) where change.key == "settings.theme" {
    ///     let theme = try change.value(as: Theme.self)
    /// }
    /// ```
    /// - Throws: ``ChronicleError/decodingFailed(key:reason:)`` when the value does not decode as
    ///   `type`, or ``ChronicleError/invalidArgument(_:)`` for a sealed value (read a secret
    ///   through its ``SecretKey``).
    public func value<Value: Decodable>(as type: Value.Type) throws(ChronicleError) -> Value? {
        guard operation == .set else { return nil }
        guard let payload else { throw .invalidArgument("the value of \(key) is sealed: read it through its SecretKey") }
        return try ValueCoder.decode(Value.self, encoding: encoding, payload: payload, key: key)
    }

    /// `#sequence date domain key op value` as `chronicle log` prints it; a sealed value shows
    /// its size only.
    public var description: String {
        let value: String = switch (operation, isSealed) {
        case (.remove, _): "(removed)"
        case (.set, true): "(sealed, \(size) bytes)"
        case (.set, false): valueJSON ?? ""
        }
        return "#\(sequence) \(date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))) \(domain) \(key) \(operation) \(value)"
    }

    init(_ committed: CommittedEvent, epoch: LogEpoch) {
        let event = committed.event
        self.epoch = epoch
        chainHash = committed.chainHash
        isHeldBack = committed.isHeldBack
        sequence = committed.sequence
        origin = event.replica
        writer = event.origin
        counter = event.counter
        timestamp = event.hlc
        domain = event.domain.name
        key = event.key
        operation = event.op
        policy = event.policy
        isSealed = event.sealed
        size = event.payload.count
        isCurrent = committed.isWinner
        let readable = event.op == .set && !event.sealed
        encoding = event.encoding
        payload = readable ? event.payload : nil
        valueJSON = readable ? ValueCoder.jsonText(encoding: event.encoding, payload: event.payload) : nil
    }
}

/// A point of a store's log that a consumer of ``Store/changes(from:)`` resumes after: see
/// ``LogEntry/checkpoint``. Codable, to keep beside the consumer's own state.
public struct LogCheckpoint: Sendable, Hashable, Codable {
    /// The last sequence handled (0: none).
    public var sequence: UInt64
    /// The log's epoch at that sequence.
    public var epoch: LogEpoch
    /// The chain hash of the record at that sequence.
    public var chainHash: [UInt8]
    /// Events at or before `sequence` that the drift guard held back when the stream delivered
    /// them: a stream resumed from here delivers each again once it is let in.
    public var heldBack: [UInt64]

    /// The beginning of any log.
    public static let start = LogCheckpoint(sequence: 0, epoch: .zero, chainHash: [])

    /// A checkpoint; take it from ``LogEntry/checkpoint``.
    public init(sequence: UInt64, epoch: LogEpoch, chainHash: [UInt8], heldBack: [UInt64] = []) {
        self.sequence = sequence
        self.epoch = epoch
        self.chainHash = chainHash
        self.heldBack = heldBack
    }

    /// Decodes a checkpoint, including one saved before it named held-back events.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        sequence = try container.decode(UInt64.self, forKey: .sequence)
        epoch = try container.decode(LogEpoch.self, forKey: .epoch)
        chainHash = try container.decode([UInt8].self, forKey: .chainHash)
        heldBack = try container.decodeIfPresent([UInt64].self, forKey: .heldBack) ?? []
    }
}
