import ChronicleFormat
import ChronicleLog

/// A store's keys by their names, their values as text: what the command-line tool reads and
/// writes (`chronicle get`, `set`, `rm`, `log --key`), where no typed ``Key`` exists. Not app API:
/// an app reads and writes through its keys, which carry the type and the default.
@_spi(Tools) public struct KeysByName: Sendable {
    let store: Store

    /// The keys of `store` by name.
    public init(_ store: Store) { self.store = store }

    /// Every log entry of the key `name` (plain and secret), in log order, found through the
    /// history index instead of a scan of the log (`chronicle log --key`).
    public func logEntries(ofKeyNamed name: String) throws(ChronicleError) -> [LogEntry] {
        try AnyKey.validate(name: name)
        let eventLog = try store.settledEventLog
        return try mappingErrors {
            let epoch = try eventLog.epoch()
            let events = try Domain.allCases.flatMap { try eventLog.history($0, name) }
            return events.sorted { $0.sequence < $1.sequence }.map { LogEntry($0, epoch: epoch) }
        }
    }

    /// The current value of the key `name` as JSON, or `nil` when it has no value (for tools:
    /// `chronicle get`). With `secret`, the secret of that name, opened with the store's key.
    /// - Throws: ``ChronicleError/decodingFailed(key:reason:)`` for a value in an encoding this
    ///   build does not know: no text stands for it that `chronicle set` could write back.
    public func currentValueJSON(forKeyNamed name: String, secret: Bool = false) throws(ChronicleError) -> String? {
        try AnyKey.validate(name: name)
        let eventLog = try store.eventLog
        let domain: Domain = secret ? .secrets : .defaults
        guard let entry = try mappingErrors({ try eventLog.entry(domain, name) }), entry.op == .set else { return nil }
        guard ValueEncoding(rawValue: entry.encoding) != nil else {
            throw .decodingFailed(
                key: name, reason: "its value is in encoding \(entry.encoding), which this build cannot read (a newer build wrote it); `chronicle log` lists it")
        }
        let payload = try store.openPayload(entry, key: AnyKey(name: name, domain: domain, sync: entry.policy, formerNames: []))
        return ValueCoder.jsonText(encoding: entry.encoding, payload: payload)
    }

    /// Whether the secret `name` has a value (read without its key: the entry, not the value).
    public func hasSecret(named name: String) throws(ChronicleError) -> Bool {
        try AnyKey.validate(name: name)
        let eventLog = try store.eventLog
        return try mappingErrors { try eventLog.entry(.secrets, name) }?.op == .set
    }

    /// Sets the plain key `name` from text (for tools: `chronicle set`).
    ///
    /// JSON is stored with the matching type (`true` as Bool, `3` as an
    /// integer, `2.5` as Double, `"x"` as String, objects and arrays as JSON);
    /// anything that is not JSON is stored as a string.
    /// With `kind`, the text is stored as that type (what the app's key expects), or the call
    /// throws ``ChronicleError/invalidArgument(_:)`` saying what the text should look like.
    /// Whatever ``currentValueJSON(forKeyNamed:secret:)`` returns sets the same value back.
    /// - Parameters:
    ///   - text: the value as text: JSON, or anything else as a string.
    ///   - name: the key's name.
    ///   - kind: the type to store; `nil` guesses from the text as above.
    ///   - policy: the sync policy; default: the key's current policy, else ``SyncPolicy/never``.
    ///     A tool never widens a key's policy by accident: a wider one must be asked for.
    ///   - secret: set the secret of that name, sealed with the store's key.
    public func setValue(
        fromText text: String, forKeyNamed name: String, as kind: ValueKind? = nil, policy: SyncPolicy? = nil, secret: Bool = false
    ) throws(ChronicleError) {
        let domain: Domain = secret ? .secrets : .defaults
        try AnyKey.validate(name: name)
        var (encoding, payload) = ValueCoder.encodeText(text)
        if let kind { (encoding, payload) = try ValueCoder.encodeText(text, as: kind) }
        guard payload.count <= store.configuration.maxValueSize else {
            throw .valueTooLarge(key: name, size: payload.count, limit: store.configuration.maxValueSize)
        }
        let existing = try mappingErrors { try store.eventLog.entry(domain, name) }
        let key = AnyKey(name: name, domain: domain, sync: policy ?? existing?.policy ?? .never, formerNames: [])
        try store.commit([
            PendingChange(
                domain: domain, key: name, policy: key.sync, op: .set, encoding: encoding.rawValue, payload: payload,
                sealer: try store.sealer(for: domain))
        ])
    }

    /// Removes the plain key `name` (for tools: `chronicle rm`) when it has a value here.
    /// - Returns: `false`, writing nothing, when the key has no value in this store (never set,
    ///   or removed already): a tombstone for it would stay in the log for good.
    /// - Parameter secret: remove the secret of that name.
    @discardableResult
    public func removeValue(forKeyNamed name: String, secret: Bool = false) throws(ChronicleError) -> Bool {
        try AnyKey.validate(name: name)
        let eventLog = try store.eventLog
        let domain: Domain = secret ? .secrets : .defaults
        guard let existing = try mappingErrors({ try eventLog.entry(domain, name) }), existing.op == .set else { return false }
        try store.commit([store.removal(of: AnyKey(name: name, domain: domain, sync: existing.policy, formerNames: []))])
        return true
    }
}
