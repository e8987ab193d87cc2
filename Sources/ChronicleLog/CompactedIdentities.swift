package import ChronicleFormat
package import ChronicleLMDB

/// Identities (origin, counter) of events that compaction dropped, kept as ranges
/// per origin in the `dots` database so that replication never brings them back
/// and `dots` shrinks instead of keeping a row per dropped event:
///
/// ```
/// key    "R" (0x52) ‖ [16] origin ‖ u64 last counter (25 bytes)
/// value  u64 first counter
/// ```
///
/// A range may span counters of events still in the log (their own 24-byte rows
/// take precedence); it never spans a counter this log has not seen.
package enum CompactedIdentities {
    package static let tag: UInt8 = 0x52

    package static func key(origin: ReplicaID, last: UInt64) -> [UInt8] { ([tag] + origin.bytes).appendingBigEndian(last) }

    /// Whether `origin:counter` lies in a range of compacted identities: one cursor seek.
    package static func contains(origin: ReplicaID, counter: UInt64, _ txn: borrowing Transaction, _ dbs: Databases) throws -> Bool {
        var found = false
        let originBytes = origin.bytes
        try txn.scanInPlace(dbs.dots, from: key(origin: origin, last: counter)) { key, value in
            guard key.count == 25, key[0] == tag, key[1..<17].elementsEqual(originBytes), value.count == 8 else { return false }
            let first = UInt64(bigEndian: value.loadUnaligned(as: UInt64.self))
            found = first <= counter
            return false
        }
        return found
    }

    /// The smallest counter above `counter` of `origin` that lies in a range of compacted
    /// identities, or `nil`: one cursor seek.
    package static func next(origin: ReplicaID, after counter: UInt64, _ txn: borrowing Transaction, _ dbs: Databases) throws -> UInt64? {
        guard counter < .max else { return nil }
        var found: UInt64?
        let originBytes = origin.bytes
        try txn.scanInPlace(dbs.dots, from: key(origin: origin, last: counter + 1)) { key, value in
            guard key.count == 25, key[0] == tag, key[1..<17].elementsEqual(originBytes), value.count == 8 else { return false }
            // The first range of `origin` that ends at or after `counter + 1` (ranges do not overlap).
            found = max(UInt64(bigEndian: value.loadUnaligned(as: UInt64.self)), counter + 1)
            return false
        }
        return found
    }

    /// A stored range, or `nil` for any other `dots` row.
    package static func parse(key: [UInt8], value: [UInt8]) -> (origin: ReplicaID, range: ClosedRange<UInt64>)? {
        guard key.count == 25, key[0] == tag, let origin = ReplicaID(bytes: Array(key[1..<17])),
            let last = UInt64(bigEndianBytes: Array(key[17..<25])), let first = UInt64(bigEndianBytes: value), first <= last
        else { return nil }
        return (origin, first...last)
    }

    /// Merges one origin's compacted identities into as few ranges as possible.
    ///
    /// - Parameters:
    ///   - compacted: ranges of identities that are gone from the log (dropped now or before).
    ///   - present: counters of this origin's events still in the log; they may join two
    ///     compacted ranges, since their own rows answer first.
    /// - Returns: the ranges to store, each holding at least one compacted identity.
    package static func merge(compacted: [ClosedRange<UInt64>], present: [UInt64]) -> [ClosedRange<UInt64>] {
        guard !compacted.isEmpty else { return [] }
        let pieces = (compacted.map { ($0, true) } + present.map { ($0...$0, false) }).sorted { $0.0.lowerBound < $1.0.lowerBound }
        var merged: [ClosedRange<UInt64>] = []
        var current = pieces[0].0
        var holdsCompacted = pieces[0].1
        for (range, isCompacted) in pieces.dropFirst() {
            if current.upperBound == .max || range.lowerBound <= current.upperBound + 1 {
                current = current.lowerBound...max(current.upperBound, range.upperBound)
                holdsCompacted = holdsCompacted || isCompacted
            } else {
                if holdsCompacted { merged.append(current) }
                current = range
                holdsCompacted = isCompacted
            }
        }
        if holdsCompacted { merged.append(current) }
        return merged
    }
}
