import ChronicleLog
public import Foundation

/// What ``StoreSalvage/copyWhatVerifies(of:into:configuration:)`` found in a damaged store and copied.
@_spi(Tools) public struct SalvageReport: Sendable {
    /// What `verify` found in the damaged store (its first problem; sound when it had none).
    public var finding: VerificationReport
    /// The last sequence of the damaged log the copy holds (0: none).
    public var copiedThrough: UInt64
    /// The new store.
    public var copy: Store
}

/// The repair of a store that openings refuse for damage (`chronicle salvage`).
@_spi(Tools) public enum StoreSalvage {
    /// Copies what verifies of a store that openings refuse for damage into a new store: the
    /// operator's explicit repair (`chronicle salvage`), never a side effect of reading.
    ///
    /// Writes nothing to the damaged store: a snapshot of its data file (`mdb_env_copy2`) is
    /// opened without the opening's refusals, with whatever keys its key source still opens,
    /// and verified; the new store gets the log up to the record before the first that does not
    /// verify (all of it when only `meta` is damaged), under its own identity, epoch and chain.
    /// It vouches for what was there when it was copied: what a cut took away stays lost here
    /// (other members, or a backup, still hold it).
    /// - Parameters:
    ///   - directory: the damaged store (not open in this process).
    ///   - target: a new, empty directory for the copy.
    ///   - configuration: the key source that opens the damaged store's keys.
    public static func copyWhatVerifies(
        of directory: URL, into target: URL, configuration: Store.Configuration = .init()
    ) throws(ChronicleError) -> SalvageReport {
        guard !EventLogRegistry.isOpen(path: directory.path) else {
            throw .invalidArgument("\(directory.path) is open in this process; salvage a store no process is using")
        }
        let snapshot = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-salvage-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: snapshot) }
        try mappingErrors {
            try FileManager.default.createDirectory(at: snapshot, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try EventLog.snapshot(directory: directory.path, into: snapshot.path)
        }
        var salvaging = configuration
        salvaging.salvage = true
        let source = try Store(directory: snapshot, configuration: salvaging)
        let finding = try source.verify()
        let (head, vouched) = try mappingErrors {
            let records = try source.eventLog.keyRecords
            // A store with a data key whose chain nothing keys (no chain key named, no chain-key
            // record): nothing in it was verified under a key (it was re-chained without one).
            let ids = try records.activeAndChainKeyIDs()
            let vouched = try ids.active == nil || ids.chain != nil || records.logShowsAKeyOfItsOwn(chainKeyRecordOnly: true)
            return (try source.eventLog.head().sequence, vouched)
        }
        let through = !finding.isSound && !vouched ? 0 : finding.firstBadSequence.map { $0 > 0 ? $0 - 1 : 0 } ?? head
        let copy = try source.copy(to: target, through: .sequence(through))
        return SalvageReport(finding: finding, copiedThrough: through, copy: copy)
    }
}
