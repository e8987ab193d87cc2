import ChronicleFormat
import ChronicleLog
public import Foundation

extension Store {
    /// Every key with a current entry, sorted by domain and name (the audit catalog).
    public func catalog() throws(ChronicleError) -> [KeyInfo] {
        let eventLog = try settledEventLog
        return try mappingErrors { try eventLog.inspection.catalog() }
    }

    /// Sizes and counts.
    public func statistics() throws(ChronicleError) -> StoreStatistics {
        let eventLog = try settledEventLog
        return try mappingErrors { try eventLog.inspection.statistics() }
    }

    /// Writes a new store in `directory` holding this log up to `point`, and its views:
    /// a point-in-time copy (`chronicle replay --until … --into DIR`).
    ///
    /// The copy gets its own replica id and epoch, keeps every event's origin,
    /// clock and policy (`.never` events included), and the wrapped data keys,
    /// so it opens with the same key source.
    /// - Parameters:
    ///   - directory: where the copy is written (a new, empty directory).
    ///   - point: the last event the copy holds.
    ///   - progress: called with (records done, records in the log).
    /// - Returns: the new store.
    @discardableResult
    public func copy(
        to directory: URL, through point: PointInTime = .end, progress: (@Sendable (UInt64, UInt64) -> Void)? = nil
    ) throws(ChronicleError) -> Store {
        let eventLog = try settledEventLog
        if let contents = try? FileManager.default.contentsOfDirectory(atPath: directory.path), !contents.isEmpty {
            throw .invalidArgument("\(directory.path) is not empty; a copy needs a new directory")
        }
        var targetConfiguration = configuration
        targetConfiguration.salvage = false
        let copy = try Store(directory: directory, configuration: targetConfiguration, keySource: (try? crypto.get())?.sourceValue)
        try LogCopy(source: eventLog, sourcePath: self.directory.path, target: copy).copy(through: point, progress: progress)
        return copy
    }

    /// Drops history the store no longer needs, in one transaction, on a live store.
    ///
    /// Drops only events older than `cutoff` that a kept event of the same key
    /// dominates. Keeps every key's winning event, sets and removes alike (so a
    /// device that was away for a year still learns that a key was removed), the
    /// greatest event of each key that replicates, and events held back by the
    /// drift guard: no current value changes, here or on any replica that syncs
    /// with this one later. Dropped identities are kept as ranges per writer, so
    /// replication never brings them back; the log gets a new epoch and an anchor
    /// record, so `verify` still holds; checkpoints of peers this store pushes to
    /// are carried over to the new sequence numbers (peers that pull from it start
    /// over, which is safe, only slower). Free pages are reused by later writes;
    /// ``reclaimSpace(directory:)`` shrinks the file.
    ///
    /// - Parameters:
    ///   - cutoff: history older than this is dropped (a key's current value is always kept).
    ///   - dropRelayOnly: also drop the relay-only records (events of newer formats,
    ///     and second versions of an identity, that a store without the group's key keeps to relay;
    ///     ``StoreStatistics/relayOnly`` counts them). Members that need them get them from another peer.
    ///   - progress: called now and then with (work done, work in all), for a progress line.
    public func compact(
        before cutoff: Date = .distantFuture, dropRelayOnly: Bool = false, progress: (@Sendable (UInt64, UInt64) -> Void)? = nil
    ) throws(ChronicleError) -> CompactionReport {
        let eventLog = try settledEventLog
        return try mappingErrors {
            try eventLog.compaction.compact(cutoffMilliseconds: UnixMilliseconds.of(cutoff), dropRelayOnly: dropRelayOnly, progress: progress)
        }
    }

    /// Drops a key's history on this replica at once: every revision its current value does not
    /// need, sealed ones included, whatever the key's ``Retention``; what ``Retention/latest``
    /// keeps stays (the current revision, and the newest one that syncs when the current one
    /// does not).
    ///
    /// ```swift
    /// try store.purgeHistory(of: .apiToken)   // old tokens gone from this device's log
    /// ```
    ///
    /// Sequences of the revisions kept do not change, so `changes(from:)` readers and peers keep
    /// their places; the identities dropped are remembered, so no peer brings them back. Peers and
    /// backups keep their own copies of the revisions they received until their own retention drops
    /// them, and a sealed one still opens there with the data key.
    ///
    /// The dropped revisions' bytes stay in the data file's free pages (LMDB reuses a page's space
    /// later, and does not clear it) until the file is rewritten: the purge marks the store, and its
    /// next opening by a process that finds no other process using it rewrites the file with a
    /// compacting copy that keeps every sequence. ``reclaimSpace(directory:)`` does it at once
    /// when no process has the store open.
    /// - Returns: the number of revisions dropped.
    @discardableResult
    public func purgeHistory(of key: AnyKey) throws(ChronicleError) -> Int {
        try AnyKey.validate(name: key.name)
        let eventLog = try settledEventLog
        return try mappingErrors { try eventLog.sweeper.purgeHistory(key.domain, key.name) }
    }

    /// Applies every key's ``Retention`` now, over the whole log: what the store also does by
    /// itself, in short steps after writes and when it opens. For tools and tests that want it done
    /// at a known moment; an app never needs to call it.
    /// - Returns: the number of revisions dropped.
    @discardableResult
    public func applyRetention() throws(ChronicleError) -> Int {
        let eventLog = try settledEventLog
        return try mappingErrors { try eventLog.sweeper.applyRetention() }
    }

    /// Waits until no pass of the automatic compaction runs (for benchmarks that measure a write
    /// together with the drops it causes, and tools that need the sweep idle).
    @_spi(Tools) public func waitForAutomaticCompaction() throws(ChronicleError) {
        let eventLog = try settledEventLog
        eventLog.sweeper.waitForPasses()
    }

    /// Shrinks a store's data file to the pages in use: a compacting copy
    /// (`mdb_env_copy2`), then an atomic rename over the old file. Every key and sequence stays
    /// as it was; the bytes of what purges and retention dropped are not in the new file.
    ///
    /// No process may have the store open while this runs (this process is
    /// checked; others cannot be, so stop the app first).
    /// - Returns: the file size before and after, in bytes.
    public static func reclaimSpace(directory: URL) throws(ChronicleError) -> (before: Int, after: Int) {
        let path = directory.standardizedFileURL.resolvingSymlinksInPath().path
        let dataFile = path + "/data.mdb"
        func size() -> Int { (try? FileManager.default.attributesOfItem(atPath: dataFile)[.size] as? NSNumber)??.intValue ?? 0 }
        // While it runs, no Store of this process opens the directory (an open waits for it).
        return try EventLogRegistry.whileClosed(path: path) { () throws(ChronicleError) in
            let before = size()
            try mappingErrors { try Inspection.reclaimSpace(path: path) }
            return (before, size())
        }
    }
}
