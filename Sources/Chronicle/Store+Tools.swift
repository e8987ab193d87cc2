public import Foundation
import LMDB

/// One key in the audit catalog (`chronicle keys`).
public struct KeyInfo: Sendable, Equatable {
    /// The key name.
    public var name: String
    /// `"defaults"` or `"secrets"`.
    public var domain: String
    /// The sync policy of the winning event.
    public var policy: SyncPolicy
    /// The size in bytes of the current payload (sealed size for sealed values).
    public var size: Int
    /// The number of revisions in the log.
    public var revisions: Int
    /// The replica that wrote the current value.
    public var lastWriter: ReplicaID
    /// When the current value was written (logical clock).
    public var lastChanged: HLC
    /// `true` when the current value is sealed.
    public var isSealed: Bool
    /// `true` when the key's current state is a remove.
    public var isRemoved: Bool
}

/// Sizes and counts of a store (`chronicle stats`).
public struct StoreStatistics: Sendable, Equatable {
    /// This replica's id.
    public var replicaID: ReplicaID
    /// The log epoch, hex.
    public var epoch: String
    /// The last log sequence.
    public var head: UInt64
    /// Log records (events, and an anchor after compaction).
    public var records: Int
    /// Keys with a current entry in the defaults view.
    public var defaultsKeys: Int
    /// Keys with a current entry in the secrets view.
    public var secretKeys: Int
    /// Known event identities (including compacted ones).
    public var dots: Int
    /// Events held back by the clock-drift guard.
    public var deferred: Int
    /// Replication checkpoints.
    public var checkpoints: Int
    /// Wrapped data keys.
    public var dataKeys: Int
    /// Bytes of the data file in use.
    public var usedBytes: Int
    /// Bytes of the data file on disk.
    public var fileBytes: Int
    /// The reserved map size (address space).
    public var mapSize: Int
}

/// A point in a log, for point-in-time copies.
public enum PointInTime: Sendable, Equatable {
    /// Every record up to and including this local sequence.
    case sequence(UInt64)
    /// Every event whose logical-clock time is at or before this date.
    case date(Date)
    /// The whole log.
    case end
}

extension Store {
    /// Every key with a current entry, sorted by domain and name (the audit catalog).
    public func catalog() throws(ChronicleError) -> [KeyInfo] {
        let engine = try engine
        return try mappingErrors {
            try engine.environment.read { txn in
                var infos: [KeyInfo] = []
                for domain in Domain.allCases {
                    var entries: [(String, ViewEntry)] = []
                    try txn.scan(engine.dbs.view(domain)) { key, value in
                        let name = String(decoding: key, as: UTF8.self)
                        entries.append((name, try ViewEntry.decoding(value, key: name)))
                        return true
                    }
                    for (name, entry) in entries {
                        let prefix = HistoryKey.prefix(domain: domain, name: name)
                        var revisions = 0
                        try txn.scan(engine.dbs.history, from: prefix) { key, _ in
                            guard key.count == prefix.count + 8, key.starts(with: prefix) else { return false }
                            revisions += 1
                            return true
                        }
                        infos.append(
                            KeyInfo(
                                name: name, domain: domain.name, policy: entry.policy, size: entry.payload.count, revisions: revisions,
                                lastWriter: entry.origin, lastChanged: entry.hlc, isSealed: entry.sealed, isRemoved: entry.op == .remove))
                    }
                }
                return infos
            }
        }
    }

    /// Sizes and counts.
    public func statistics() throws(ChronicleError) -> StoreStatistics {
        let engine = try engine
        return try mappingErrors {
            let dbs = engine.dbs
            let fileBytes = (try? FileManager.default.attributesOfItem(atPath: engine.path + "/data.mdb")[.size] as? NSNumber)??.intValue ?? 0
            return try engine.environment.read { txn in
                var dataKeys = 0
                try txn.scan(dbs.meta, from: MetaKey.wrappedKeyPrefix) { key, _ in
                    guard key.starts(with: MetaKey.wrappedKeyPrefix) else { return false }
                    dataKeys += 1
                    return true
                }
                let epoch = try txn.get(dbs.meta, key: MetaKey.epoch) ?? []
                return StoreStatistics(
                    replicaID: engine.replica, epoch: epoch.map { String(format2: $0) }.joined(), head: try LogHead.read(txn, dbs).sequence,
                    records: try txn.count(dbs.events), defaultsKeys: try txn.count(dbs.defaults), secretKeys: try txn.count(dbs.secrets),
                    dots: try txn.count(dbs.dots), deferred: try txn.count(dbs.deferred), checkpoints: try txn.count(dbs.peers),
                    dataKeys: dataKeys, usedBytes: engine.environment.usedBytes, fileBytes: fileBytes, mapSize: engine.environment.mapSize)
            }
        }
    }

    /// Writes a new store in `directory` holding this log up to `point`, and its views:
    /// a point-in-time copy (`chronicle replay --until … --into DIR`).
    ///
    /// The copy gets its own replica id and epoch, keeps every event's origin,
    /// clock and policy (`.never` events included), and the wrapped data keys,
    /// so it opens with the same key source.
    /// - Parameter progress: called with (records done, records in the log).
    /// - Returns: the new store.
    @discardableResult
    public func copy(
        to directory: URL, through point: PointInTime = .end, progress: (@Sendable (UInt64, UInt64) -> Void)? = nil
    ) throws(ChronicleError) -> Store {
        let engine = try engine
        if let contents = try? FileManager.default.contentsOfDirectory(atPath: directory.path), !contents.isEmpty {
            throw .invalidArgument("\(directory.path) is not empty; a copy needs a new directory")
        }
        let copy = try Store(directory: directory, configuration: configuration)
        let target = try copy.engine
        try mappingErrors {
            let keys = try engine.environment.read { txn in
                var records: [([UInt8], [UInt8])] = []
                try txn.scan(engine.dbs.meta, from: MetaKey.wrappedKeyPrefix) { key, value in
                    guard key.starts(with: MetaKey.wrappedKeyPrefix) else { return false }
                    records.append((key, value))
                    return true
                }
                return records
            }
            try target.environment.write { txn in
                for (key, value) in keys where try txn.get(target.dbs.meta, key: key) == nil {
                    try txn.put(target.dbs.meta, key: key, value: value)
                }
            }
            let total = try engine.head().sequence
            var last: UInt64 = 0
            switch point {
            case let .sequence(limit): last = min(limit, total)
            case .date, .end: last = total
            }
            var after: UInt64 = 0
            while after < last {
                var range = try engine.exportRange(after: after, filter: nil, excluding: nil, maxEvents: 4096, maxBytes: 8 << 20, through: last)
                if case let .date(date) = point {
                    let limit = UInt64(max(0, date.timeIntervalSince1970 * 1000))
                    range.events.removeAll { $0.hlc.milliseconds > limit }
                }
                _ = try target.importRange(range, checkpoint: nil, requireSealedDefaults: configuration.encryptDefaults)
                guard range.upTo > after else { break }
                after = range.upTo
                progress?(after, last)
            }
        }
        return copy
    }

    /// Drops history the store no longer needs, in one transaction, on a live store.
    ///
    /// Keeps each key's winning event (tombstones until they are older than
    /// `tombstoneRetention` and every known peer has acknowledged them), every
    /// event at or after `cutoff`, and every event some known peer has not
    /// acknowledged. Dropped events' identities are kept, so replication never
    /// brings them back; the log gets a new epoch and an anchor record, so
    /// `verify` still holds. Current values do not change. Free pages are
    /// reused by later writes; ``reclaimSpace(directory:)`` shrinks the file.
    public func compact(before cutoff: Date, tombstoneRetention: Duration = .seconds(30 * 86_400)) throws(ChronicleError) -> CompactionReport {
        let engine = try engine
        return try mappingErrors {
            try engine.compact(
                cutoffMilliseconds: UInt64(max(0, cutoff.timeIntervalSince1970 * 1000)),
                tombstoneRetentionMilliseconds: UInt64(max(0, tombstoneRetention.components.seconds)) * 1000)
        }
    }

    /// Shrinks a store's data file to the pages in use: a compacting copy
    /// (`mdb_env_copy2`), then an atomic rename over the old file.
    ///
    /// No process may have the store open while this runs (this process is
    /// checked; others cannot be, so stop the app first).
    /// - Returns: the file size before and after, in bytes.
    public static func reclaimSpace(directory: URL) throws(ChronicleError) -> (before: Int, after: Int) {
        let path = directory.standardizedFileURL.resolvingSymlinksInPath().path
        guard !EngineRegistry.isOpen(path: path) else {
            throw .invalidArgument("the store is open in this process; close every Store on it first")
        }
        let dataFile = path + "/data.mdb"
        func size() -> Int { (try? FileManager.default.attributesOfItem(atPath: dataFile)[.size] as? NSNumber)??.intValue ?? 0 }
        let before = size()
        try mappingErrors {
            try Environment.compactFile(at: path)
            // The new file has a new inode; record it so the store keeps its identity (it is not a copy).
            let environment = try Environment(path: path, options: .init())
            let dbs = try Databases(environment: environment)
            try environment.write { txn in
                try txn.put(dbs.meta, key: MetaKey.home, value: Engine.fileIdentity(directory: path))
            }
        }
        return (before, size())
    }
}
