public import Foundation

/// One record of the log as the tools show it. A sealed value is never exposed.
public struct LogEntry: Sendable, Equatable {
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
    /// The key name.
    public let key: String
    /// Set or remove.
    public let operation: Operation
    /// The event's sync policy.
    public let policy: SyncPolicy
    /// `true` when the payload is sealed.
    public let isSealed: Bool
    /// The encoded payload size in bytes.
    public let size: Int
    /// The value as JSON, for unsealed sets; `nil` for removes and sealed values.
    public let valueJSON: String?

    /// The timestamp as wall-clock time.
    public var date: Date { UnixMilliseconds.date(timestamp.milliseconds) }

    init(_ committed: CommittedEvent) {
        let event = committed.event
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
        valueJSON = (event.op == .set && !event.sealed) ? ValueCoder.jsonText(encoding: event.encoding, payload: event.payload) : nil
    }
}
