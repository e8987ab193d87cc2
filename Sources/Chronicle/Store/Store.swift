import ChronicleFormat
import ChronicleLog
public import Foundation
import Logging
import Synchronization

/// An event-sourced settings and secrets store.
///
/// Every `set` and `remove` appends an event to a log in LMDB; reads come from
/// materialized views of that log. Open as many `Store`s on one directory as
/// you like, in as many threads and processes: they share one environment per
/// process and LMDB's locks across processes.
///
/// ```swift
/// let store = try Store(directory: url)
/// store[.theme] = .dark                         // non-throwing; errors go to the logger
/// try store.set(.dark, for: .theme)              // throwing form
/// let theme = store[.theme]                      // the default when absent
/// try store.write { batch in                     // one transaction, one fsync
///     batch[.launches] = 3
///     batch[.theme] = .light
/// }
/// ```
public final class Store: Sendable {
    let backend: Result<EventLogLease, ChronicleError>
    let crypto: Result<Keyring, ChronicleError>
    /// The configuration the store was opened with.
    public let configuration: Configuration
    /// The store's directory.
    public let directory: URL
    /// The open observation channels of this store, one per observed key and value type.
    let channels = KeyChannels()

    /// Opens the store in `directory`, creating the directory and the store when absent.
    ///
    /// - Parameters:
    ///   - directory: A directory of its own (Chronicle creates `data.mdb` and `lock.mdb` in it).
    ///   - configuration: Key source, durability, logger and limits.
    /// - Throws: ``ChronicleError`` when the store cannot be opened, its format
    ///   is newer than this library, or the key source does not open its data key.
    public convenience init(directory: URL, configuration: Configuration = .init()) throws(ChronicleError) {
        try self.init(directory: directory, configuration: configuration, keySource: nil)
    }

    /// - Parameter keySource: the key source already read (a copy of an open store).
    init(directory: URL, configuration: Configuration, keySource: Keyring.Source?) throws(ChronicleError) {
        // Before anything is created: a key wrapped at such a cost could never be opened again.
        for cost in [configuration.keyDerivationCost, configuration.travelKeyCost] {
            if let problem = cost.problem { throw .invalidArgument(problem) }
        }
        let lease = try EventLogRegistry.lease(directory: directory, configuration: configuration.logOptions)
        self.backend = .success(lease)
        self.directory = directory
        self.crypto = Keyring.open(keyRecords: lease.eventLog.keyRecords, configuration: configuration.keyringOptions, source: keySource)
        // The keyring holds the key material in secure memory now: keep no passphrase string.
        var kept = configuration
        kept.keySource = configuration.keySource?.redacted
        self.configuration = kept
        // An explicit key source must work at open (a wrong passphrase is reported before anything is written).
        // Without one, the store still opens: plain values read as usual and secrets report why they cannot;
        // but damage found in the files (a head MAC that does not verify) refuses it either way.
        if case let .failure(error) = crypto, configuration.keySource != nil || error.isDamage { throw error }
        // Accepted: the opening's maintenance may write now (nothing was written before the checks).
        if !configuration.salvage { try mappingErrors { try lease.eventLog.startMaintenance() } }
    }

    /// A store that failed to open: reads give defaults, throwing calls throw `error`.
    init(unavailable error: ChronicleError, directory: URL, configuration: Configuration) {
        backend = .failure(error)
        crypto = .failure(error)
        var kept = configuration
        kept.keySource = configuration.keySource?.redacted
        self.configuration = kept
        self.directory = directory
    }

    /// Why this store could not be opened, or `nil` when it is open.
    ///
    /// ``standard`` opens lazily and never throws: when its store cannot be opened, every read
    /// gives the key's default and every throwing call throws this error. An app that did not call
    /// ``bootstrap(appID:configuration:)`` checks it to tell a refused store from an empty one:
    ///
    /// ```swift
    /// if let error = Store.standard.openingError, error.isDamage {
    ///     report(error)   // the store's files are damaged: its values are not the defaults
    /// }
    /// ```
    public var openingError: ChronicleError? {
        if case let .failure(error) = backend { return error }
        return nil
    }

    var eventLog: EventLog {
        get throws(ChronicleError) { try backend.get().eventLog }
    }

    /// The event log after every change this process queued with a non-throwing form is
    /// committed: for operations on the log itself (ranges, history, verification, maintenance).
    var settledEventLog: EventLog {
        get throws(ChronicleError) {
            let eventLog = try backend.get().eventLog
            try mappingErrors { try eventLog.local.settlePending() }
            return eventLog
        }
    }

    /// This replica's id: the origin of the events this store writes.
    public var replicaID: ReplicaID {
        get throws(ChronicleError) { try eventLog.replica }
    }

    // MARK: - Plain values

    /// The value of `key`, or its default when absent. Errors are logged and read as the default.
    public subscript<Value>(key: Key<Value>) -> Value {
        get {
            do { return try plainValue(key) } catch {
                log(error, "read", key)
                return key.defaultValue
            }
        }
        set { loggingWrite(newValue, for: key) }
    }

    /// The value of `key`, or its default when it has never been set or was removed.
    ///
    /// Reading a default writes nothing.
    /// - Throws: ``ChronicleError/decodingFailed(key:reason:)`` when the stored
    ///   value does not decode as `Value`, or a storage error.
    public func value<Value>(for key: Key<Value>) throws(ChronicleError) -> Value {
        try plainValue(key)
    }

    /// Sets `key` to `value` (setting an optional key to `nil` removes it).
    ///
    /// Returns after the change is committed (durably, by default).
    public func set<Value>(_ value: Value, for key: Key<Value>) throws(ChronicleError) {
        try commit([change(value, for: key)])
    }

    /// Removes the value of `key` by appending a remove event (a tombstone);
    /// reads give the default afterwards.
    public func remove<Value>(_ key: Key<Value>) throws(ChronicleError) {
        try commit([removal(of: key)])
    }

    /// Every revision of `key`, oldest first: values, removes (as `nil`), times and origins.
    public func history<Value>(of key: Key<Value>) throws(ChronicleError) -> [Revision<Value>] {
        try revisions(of: key)
    }

    // MARK: - Batches

    /// Applies many changes in one transaction: all of them or none.
    ///
    /// ```swift
    /// try store.write { batch in
    ///     batch[.launches] = 3
    ///     try batch.remove(.draft)
    /// }
    /// ```
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws (then nothing is written), or a ``ChronicleError``.
    public func write<R>(_ body: (Batch) throws -> R) throws -> R {
        let batch = Batch(store: self)
        let result = try body(batch)
        if let error = batch.firstError { throw error }
        try commit(batch.changes)
        return result
    }

    // MARK: - Maintenance

    /// Drops the views and rebuilds them from the log (what `chronicle replay` does).
    ///
    /// Runs in one transaction: if a record is corrupt, the error names its
    /// sequence and nothing changes.
    public func rebuildViews() throws(ChronicleError) {
        let eventLog = try settledEventLog
        try mappingErrors { try eventLog.replayer.rebuildViews() }
    }

    /// Checks that every record decodes, the hash chain holds and the views equal a replay.
    ///
    /// Reads one snapshot; writers are never blocked.
    /// - Parameter progress: called now and then with (records checked, records in the log).
    /// - Returns: what the check found; ``VerificationReport/isSound`` is false only for damage.
    /// - Throws: ``ChronicleError/keyUnavailable(reason:)`` when the log is keyed and this store
    ///   was opened without its key source: the check cannot run, which is not a finding.
    public func verify(progress: (@Sendable (UInt64, UInt64) -> Void)? = nil) throws(ChronicleError) -> VerificationReport {
        let keyring = try? crypto.get()
        try mappingErrors { try keyring?.unwrapLocalKeys() }
        let eventLog = try settledEventLog
        return try mappingErrors {
            try eventLog.verification.verify(progress: progress, verifier: keyring, heldBackMustBeAhead: !configuration.salvage)
        }
    }

    // MARK: - Internals shared by keys and secrets

    func commit(_ changes: [PendingChange]) throws(ChronicleError) {
        guard !changes.isEmpty else { return }
        let changes = try prepared(changes)
        let eventLog = try eventLog
        _ = try mappingErrors { try eventLog.commit(changes) }
    }

    /// `changes` as this store writes them: a member of a sync group authenticates every event.
    func prepared(_ changes: [PendingChange]) throws(ChronicleError) -> [PendingChange] {
        guard configuration.keySource != nil else { return changes }
        let keyring = try crypto.get()
        var changes = changes
        for index in changes.indices { changes[index].authenticator = keyring }
        return changes
    }

    /// The non-throwing read behind the subscripts: errors are logged (never the value) and read as the default.
    func loggingRead<K: ValueKey>(_ key: K) -> K.Value {
        do { return try readValue(key, default: key.defaultValue) } catch {
            log(error, "read", key)
            return key.defaultValue
        }
    }

    /// The non-throwing write behind the subscripts and the wrapper setters: returns as soon as
    /// the change is visible to every read and observer of this process, and is committed
    /// (durably) moments later by the group committer. Errors are logged (never the value).
    func loggingWrite<K: ValueKey>(_ value: K.Value, for key: K) {
        do {
            let eventLog = try eventLog
            do {
                try mappingErrors { try eventLog.enqueue(try prepared([change(value, for: key)])) }
            } catch {
                // Never queued (a value too large, no data key): heard like a failed commit.
                eventLog.local.recordFailure(WriteFailure(keys: [key.name], error: error), ticket: eventLog.local.lastTicket)
                throw error
            }
        } catch {
            log(error, "write", key)
        }
    }

    func log(_ error: any Error, _ action: String, _ key: AnyKey) {
        configuration.logger.error(
            "chronicle: \(action) of key failed",
            metadata: ["key": "\(key.name)", "error": "\(error)", "store": "\(directory.path)"])
    }
}
