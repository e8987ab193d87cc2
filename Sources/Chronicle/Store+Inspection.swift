public import Foundation
import LMDB

/// One record of the log as the tools show it. A sealed value is never exposed.
public struct LogEntry: Sendable, Equatable {
    /// The local log sequence.
    public let sequence: UInt64
    /// The replica that made the change.
    public let origin: ReplicaID
    /// The per-origin counter (with `origin`, the event's identity).
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
    public var date: Date { Date(timeIntervalSince1970: Double(timestamp.milliseconds) / 1000) }

    init(_ committed: CommittedEvent) {
        let event = committed.event
        sequence = committed.sequence
        origin = event.origin
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

extension Store {
    /// The log records with sequence in `range`, oldest first (for tools: `chronicle log`).
    ///
    /// Checks the hash chain from the start of the log as it goes.
    public func logEntries(in range: ClosedRange<UInt64> = 1...UInt64.max) throws(ChronicleError) -> [LogEntry] {
        let engine = try engine
        return try mappingErrors {
            try engine.environment.read { txn in
                var entries: [LogEntry] = []
                _ = try engine.replayLog(txn, upTo: range.upperBound) { sequence, event in
                    if range.contains(sequence) { entries.append(LogEntry(CommittedEvent(sequence: sequence, event: event))) }
                }
                return entries
            }
        }
    }

    /// The current value of the plain key `name` as JSON, or `nil` when it has
    /// no value (for tools: `chronicle get`).
    public func currentValueJSON(forKeyNamed name: String) throws(ChronicleError) -> String? {
        try Keys.validate(name: name)
        let engine = try engine
        guard let entry = try mappingErrors({ try engine.entry(.defaults, name) }), entry.op == .set else { return nil }
        let payload = try openPayload(entry, key: Keys(name: name, domain: .defaults, sync: entry.policy, formerNames: []))
        return ValueCoder.jsonText(encoding: entry.encoding, payload: payload)
    }

    /// Sets the plain key `name` from text (for tools: `chronicle set`).
    ///
    /// JSON is stored with the matching type (`true` as Bool, `3` as an
    /// integer, `2.5` as Double, `"x"` as String, objects and arrays as JSON);
    /// anything that is not JSON is stored as a string.
    /// - Parameter policy: the sync policy; default: the key's current policy, else `.automaticSmall`.
    public func setValue(fromText text: String, forKeyNamed name: String, policy: SyncPolicy? = nil) throws(ChronicleError) {
        try Keys.validate(name: name)
        let (encoding, payload) = ValueCoder.encodeText(text)
        guard payload.count <= configuration.maxValueSize else {
            throw .valueTooLarge(key: name, size: payload.count, limit: configuration.maxValueSize)
        }
        let existing = try mappingErrors { try engine.entry(.defaults, name) }
        let key = Keys(name: name, domain: .defaults, sync: policy ?? existing?.policy ?? .automaticSmall, formerNames: [])
        try commit([
            PendingChange(
                domain: .defaults, key: name, policy: key.sync, op: .set, encoding: encoding.rawValue, payload: payload,
                sealer: try sealer(for: .defaults))
        ])
    }

    /// Removes the plain key `name` (for tools: `chronicle rm`).
    public func removeValue(forKeyNamed name: String) throws(ChronicleError) {
        try Keys.validate(name: name)
        let existing = try mappingErrors { try engine.entry(.defaults, name) }
        try commit([removal(of: Keys(name: name, domain: .defaults, sync: existing?.policy ?? .automaticSmall, formerNames: []))])
    }
}

extension ValueCoder {
    /// Encodes text typed by a person: JSON scalars keep their type, other JSON is JSON, the rest is a string.
    static func encodeText(_ text: String) -> (ValueEncoding, [UInt8]) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed == "true" { return (.bool, [1]) }
        if trimmed == "false" { return (.bool, [0]) }
        if let int = Int64(trimmed) { return (.int, int.bigEndianBytes) }
        if trimmed.first.map({ $0.isNumber || $0 == "-" }) == true, let double = Double(trimmed), double.isFinite {
            return (.double, double.bitPattern.bigEndianBytes)
        }
        if let data = trimmed.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        {
            if let string = object as? String { return (.string, Array(string.utf8)) }
            if object is [Any] || object is [String: Any] { return (.json, Array(data)) }
        }
        return (.string, Array(text.utf8))
    }
}
