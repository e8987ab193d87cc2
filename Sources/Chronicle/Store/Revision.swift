import ChronicleFormat
public import Foundation

/// One revision of a key, from its history.
///
/// The `description` of a secret's revision never shows its value.
public struct Revision<Value: Sendable>: Sendable, CustomStringConvertible {
    /// The value set, or `nil` for a remove.
    public let value: Value?
    /// `true` when this revision removed the value.
    public let isRemoval: Bool
    /// When the change was made (the event's hybrid logical clock, as wall time).
    public let date: Date
    /// The event's hybrid logical clock reading (the conflict-resolution order).
    public let timestamp: HLC
    /// The local log sequence of the event.
    public let sequence: UInt64
    /// The replica (device) that made the change: its ``Store/replicaID``.
    public let origin: ReplicaID
    /// `true` when this replica made the change.
    public let isLocal: Bool
    /// `true` for a revision of a ``SecretKey``.
    public let isSecret: Bool

    init(value: Value?, event: Event, sequence: UInt64, localReplica: ReplicaID) {
        self.value = value
        isRemoval = event.op == .remove
        date = UnixMilliseconds.date(event.hlc.milliseconds)
        timestamp = event.hlc
        self.sequence = sequence
        origin = event.replica
        isLocal = event.replica == localReplica
        isSecret = event.domain == .secrets
    }

    public var description: String {
        let shown: String
        if isRemoval {
            shown = "removed"
        } else if isSecret {
            shown = "<redacted>"
        } else {
            shown = value.map { String(describing: $0) } ?? "nil"
        }
        return "Revision(#\(sequence), \(shown), at \(date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))), by \(origin.short))"
    }
}

extension Revision: Equatable where Value: Equatable {}
