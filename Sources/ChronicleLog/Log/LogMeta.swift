import ChronicleFormat
import ChronicleLMDB
import Foundation

/// What a log checks and records in `meta` when it opens: its format, its replica id and
/// epoch (renewed in a copy or a restored backup), its default retention.
enum LogMeta {
    /// Creates or checks the `meta` entries; returns the replica id.
    ///
    /// A store whose data file is not the one it was created in (a copied
    /// directory or a restored backup) gets a new replica id and log epoch
    /// before its first write, so two copies never mint the same dots.
    static func prepare(_ txn: borrowing Transaction, _ dbs: Databases, directory: String) throws -> ReplicaID {
        if let format = try txn.get(dbs.meta, key: MetaKey.format) {
            let found = UInt32(bigEndianBytes: format) ?? UInt32.max
            guard found <= EventLog.formatVersion else { throw ChronicleError.incompatibleFormat(found: found, supported: EventLog.formatVersion) }
        } else {
            try txn.put(dbs.meta, key: MetaKey.format, value: EventLog.initialFormat.bigEndianBytes)
        }
        let home = Self.fileIdentity(directory: directory)
        var replica = try txn.get(dbs.meta, key: MetaKey.replica).flatMap(ReplicaID.init(bytes:))
        if let storedHome = try txn.get(dbs.meta, key: MetaKey.home), storedHome != home {
            replica = nil  // a copy: renew identity and epoch
        }
        guard let replica else {
            let fresh = ReplicaID.random()
            // A keyed head's MAC covers the epoch, and no key is at hand here: keep the epoch it
            // covers (unless an earlier copy kept one already) until the next head write makes a
            // new MAC, so the copy verifies before it writes.
            if try txn.get(dbs.meta, key: MetaKey.headMAC) != nil, try txn.get(dbs.meta, key: MetaKey.macEpoch) == nil,
                let covered = try txn.get(dbs.meta, key: MetaKey.epoch)
            {
                try txn.put(dbs.meta, key: MetaKey.macEpoch, value: covered)
            }
            try txn.put(dbs.meta, key: MetaKey.replica, value: fresh.bytes)
            try txn.put(dbs.meta, key: MetaKey.epoch, value: LogEpoch.random().bytes)
            try txn.put(dbs.meta, key: MetaKey.home, value: home)
            // A new replica starts its own counters; the log's sequence and chain carry on.
            try txn.put(dbs.meta, key: MetaKey.counter, value: UInt64(0).bigEndianBytes)
            return fresh
        }
        return replica
    }

    /// Refuses a keyed log whose `meta` lost what says how it is keyed: the log, not `meta`, says
    /// whether the chain is keyed, and with no chain key named (or the log read as one keyed by
    /// format 1) no head MAC would be checked, so a cut tail would verify. Runs before an opening
    /// writes anything. A healthy store pays a few `meta` reads: the log is read only when `meta`
    /// shows both keying and its absence (no chain key but an active data key, a head MAC or
    /// `chain.inlog`; a chain key but neither `chain.inlog` nor a head MAC), which a healthy store
    /// shows only until this version first writes to a store of format 1.
    /// - Throws: `.corruptMeta("chain.key", …)` naming the log's first chain-key record;
    ///   `.corruptMeta("chain.inlog", …)` for a log with such a record read as format 1;
    ///   `.corruptMeta("dk/", …)` when `meta` names a chain key whose record is gone.
    static func refuseForgottenChainKey(_ txn: borrowing Transaction, _ dbs: Databases) throws {
        if let named = try txn.get(dbs.meta, key: MetaKey.chainKey) {
            // The chain key is a data key of this store's own, whose record no build deletes.
            let id = try KeyID(metaEntry: "chain key", named)
            if try txn.get(dbs.meta, key: MetaKey.chainInLog) == nil, try txn.get(dbs.meta, key: MetaKey.headMAC) == nil,
                let sequence = try firstChainKeyRecord(txn, dbs)
            {
                // Read as a store keyed by format 1 (keyed from record 1, its head MAC written at its
                // next write), a log with a chain-key record would go unchecked: a cut tail of a
                // member's log, whose chain-key record is record 1, verifies that way.
                throw ChronicleError.corruptMeta(
                    entry: "chain.inlog",
                    reason: "the log holds a chain-key record (record \(sequence)), but meta has neither chain.inlog nor a head MAC, as only a "
                        + "store keyed by format 1 has: the entries were deleted, so the head could have been cut unseen. Nothing was written")
            }
            guard try txn.get(dbs.meta, key: MetaKey.wrappedKey(id)) == nil else { return }
            throw ChronicleError.corruptMeta(
                entry: "dk/",
                reason: "the log's chain is keyed with data key \(id), whose record is gone from meta: the store's key records were "
                    + "deleted, and its sealed values and chain can no longer be checked. Nothing was written; restore the store "
                    + "from a backup or another member")
        }
        var traces = false
        for entry in [MetaKey.activeKey, MetaKey.headMAC, MetaKey.chainInLog] where try txn.get(dbs.meta, key: entry) != nil { traces = true }
        guard traces, let sequence = try firstChainKeyRecord(txn, dbs) else { return }
        throw forgottenChainKey(at: sequence)
    }

    /// The error of a log keyed from `sequence` whose `meta` names no chain key.
    static func forgottenChainKey(at sequence: UInt64) -> ChronicleError {
        .corruptMeta(
            entry: "chain.key",
            reason: "the log's chain is keyed from record \(sequence), but meta names no chain key (the entry was deleted), so the head "
                + "could have been cut or edited unseen. Nothing was written; `chronicle verify` with the key says more, and "
                + "`chronicle salvage --into DIR` copies what verifies into a new store")
    }

    /// The sequence of the log's first chain-key record, if it holds one.
    static func firstChainKeyRecord(_ txn: borrowing Transaction, _ dbs: Databases) throws -> UInt64? {
        var found: UInt64?
        try txn.scanInPlace(dbs.events) { key, value in
            guard value.first == RecordKind.chainKey.rawValue else { return true }
            found = key.count == 8 ? UInt64(bigEndian: key.loadUnaligned(as: UInt64.self)) : 0
            return false
        }
        return found
    }

    /// The retention of keys that declare none: the configured one, recorded in `meta` when it
    /// differs from the record; with none configured (a tool), the recorded one, else the standard.
    static func defaultRetention(_ txn: borrowing Transaction, _ dbs: Databases, configured: Retention?) throws -> Retention {
        let recorded = try txn.get(dbs.meta, key: MetaKey.defaultRetention).flatMap { UInt32(bigEndianBytes: $0) }.map(Retention.init(rule:))
        guard let configured else { return recorded ?? .standard }
        if recorded != configured { try txn.put(dbs.meta, key: MetaKey.defaultRetention, value: configured.rule.bigEndianBytes) }
        return configured
    }

    /// The inode of the data file, which changes when the store is copied or restored.
    package static func fileIdentity(directory: String) -> [UInt8] {
        let attributes = try? FileManager.default.attributesOfItem(atPath: directory + "/data.mdb")
        let inode = (attributes?[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0
        return inode.bigEndianBytes
    }
}
