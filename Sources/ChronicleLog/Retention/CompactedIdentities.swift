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

    /// Whether `origin:counter` lies in a range of compacted identities: one cursor seek (and
    /// at most ``maxKeysPassedOver`` steps past other keys).
    package static func contains(origin: ReplicaID, counter: UInt64, _ txn: borrowing Transaction, _ dbs: Databases) throws -> Bool {
        guard let range = try firstRange(of: origin, endingAtOrAfter: counter, txn, dbs) else { return false }
        return range.lowerBound <= counter
    }

    /// The counters above `counter` of the first range of `origin` that holds any, or `nil`.
    package static func next(origin: ReplicaID, after counter: UInt64, _ txn: borrowing Transaction, _ dbs: Databases) throws -> ClosedRange<UInt64>? {
        guard counter < .max, let range = try firstRange(of: origin, endingAtOrAfter: counter + 1, txn, dbs) else { return nil }
        return max(range.lowerBound, counter + 1)...range.upperBound
    }

    /// How many other keys under a range key's 17 bytes a lookup passes over. An identity row
    /// of an origin that begins with `R` and the looked-up origin's first 15 bytes has them too
    /// when that origin's 16th byte is 0, and sorts among its ranges: a few are passed over; past
    /// the bound (rows someone planted) the answer is "no range", so a lookup never walks them all.
    /// That answer fails open, on purpose: an import may take back a compacted event (it loses to
    /// what compaction kept), and a local write of a writer whose id ends in 0 may take an
    /// identity a forger claimed and compacted (the forger could claim it elsewhere anyway);
    /// failing closed would let the same rows stop every import of the origin or every local write.
    static let maxKeysPassedOver = 64

    /// The first well-formed range of `origin` (ranges do not overlap) whose last counter is
    /// `counter` or more. A row that is not one (another length, a value that is not 8 bytes, a
    /// first counter past the last: a damaged file) is passed over, as ``parse(key:value:)`` drops it.
    static func firstRange(
        of origin: ReplicaID, endingAtOrAfter counter: UInt64, _ txn: borrowing Transaction, _ dbs: Databases
    ) throws -> ClosedRange<UInt64>? {
        var found: ClosedRange<UInt64>?
        var passed = 0
        let originBytes = origin.bytes
        try txn.scanInPlace(dbs.dots, from: key(origin: origin, last: counter)) { key, value in
            guard key.count >= 17, key[0] == tag, key[1..<17].elementsEqual(originBytes) else { return false }
            if key.count == 25, value.count == 8 {
                let last = UInt64(bigEndian: key.loadUnaligned(fromByteOffset: 17, as: UInt64.self))
                let first = UInt64(bigEndian: value.loadUnaligned(as: UInt64.self))
                if first <= last {
                    found = first...last
                    return false
                }
            }
            passed += 1
            return passed < maxKeysPassedOver
        }
        return found
    }

    /// How many rows of an origin's present identities ``add(origin:counters:_:_:)`` reads to
    /// join ranges across them; past it, ranges join across what it read (more rows, never a
    /// range over an identity this log has not seen).
    static let maxPresentRead = 4_096

    /// Records `counters` (ascending, their own rows already deleted) as compacted identities of
    /// `origin`, joined with the origin's neighbouring ranges wherever only identities still in
    /// the log lie between: an origin's dropped events take a few rows, not one each.
    ///
    /// It reads the ranges next to and among the counters, and the origin's rows from the end
    /// of the range before the first counter to the start of the range after the last (at most
    /// ``maxPresentRead``): what one step of the compaction dropped of an origin, not its history.
    package static func add(origin: ReplicaID, counters all: [UInt64], _ txn: borrowing Transaction, _ dbs: Databases) throws {
        // A counter inside a range already is known once its row is gone (a kept identity the
        // range spanned): nothing to join, and no rows to read.
        var counters: [UInt64] = []
        for counter in all where try !contains(origin: origin, counter: counter, txn, dbs) { counters.append(counter) }
        guard let low = counters.first, let high = counters.last else { return }
        let originBytes = origin.bytes
        // The range before the first counter.
        var before: ClosedRange<UInt64>?
        try txn.scanBackwardInPlace(dbs.dots, before: key(origin: origin, last: low)) { key, value in
            if let range = parse(key: Array(key), value: Array(value)), range.origin == origin { before = range.range }
            return false
        }
        // Ranges among the counters, and the first one after the last.
        var among: [ClosedRange<UInt64>] = []
        var after: ClosedRange<UInt64>?
        var passed = 0
        try txn.scanInPlace(dbs.dots, from: key(origin: origin, last: low)) { key, value in
            guard key.count >= 17, key[0] == tag, key[1..<17].elementsEqual(originBytes) else { return false }
            guard let range = parse(key: Array(key), value: Array(value)) else {
                passed += 1
                return passed < maxKeysPassedOver
            }
            if range.range.lowerBound > high {
                after = range.range
                return false
            }
            among.append(range.range)
            return among.count < maxPresentRead
        }
        let scanLow = before.map { $0.upperBound + 1 } ?? low
        let scanHigh = max(high, among.map(\.upperBound).max() ?? high, after.map { $0.lowerBound - 1 } ?? high)
        var present: [UInt64] = []
        try txn.scanInPlace(dbs.dots, from: originBytes.appendingBigEndian(scanLow)) { key, _ in
            guard key.count == 24, key[0..<16].elementsEqual(originBytes) else { return false }
            let counter = UInt64(bigEndian: key.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
            guard counter <= scanHigh else { return false }
            present.append(counter)
            return present.count < maxPresentRead
        }
        let ranges = [before, after].compactMap { $0 } + among
        for range in ranges { _ = try txn.delete(dbs.dots, key: key(origin: origin, last: range.upperBound)) }
        for range in merge(compacted: ranges + counters.map { $0...$0 }, present: present) {
            try txn.put(dbs.dots, key: key(origin: origin, last: range.upperBound), value: range.lowerBound.bigEndianBytes)
        }
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
