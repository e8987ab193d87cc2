import ChronicleFormat
import ChronicleLMDB

/// This opening's writer's counter through one write transaction: the last one used, and the
/// next span of its counters that `dots` already holds.
///
/// Only this opening writes as `writer`, but another process sharing the file may have
/// imported a carrier's events under the writer's next identities (rows), and compacted some
/// (ranges): a local write skips them rather than fail or take an identity that is someone
/// else's. The span is looked up once a transaction and again only past it (two seeks,
/// where a lookup per event cost 17% of a batch), and a span is skipped whole.
struct LocalCounter {
    let writer: ReplicaID
    var last: UInt64
    private var taken: ClosedRange<UInt64>?
    private var looked = false

    init(writer: ReplicaID, last: UInt64) {
        (self.writer, self.last) = (writer, last)
    }

    private static let spent = ChronicleError.storeUnavailable(reason: "this writer's counters are spent; reopen the store")

    /// The counter of the next local event.
    /// - Throws: `storeUnavailable` when the counters up to 2^48 are spent (or taken).
    mutating func next(_ txn: borrowing Transaction, _ dbs: Databases) throws -> UInt64 {
        if !looked {
            taken = try nextTaken(after: last, txn, dbs)
            looked = true
        }
        guard last < Event.maxCounter else { throw Self.spent }
        last += 1
        // A span starts above the last counter used (it is looked up after it): skip it whole.
        while let span = taken, span.lowerBound <= last {
            guard span.upperBound < Event.maxCounter else { throw Self.spent }
            last = max(last, span.upperBound + 1)
            taken = try nextTaken(after: last - 1, txn, dbs)
        }
        return last
    }

    /// The lowest span of the writer's counters above `counter` that `dots` holds, from the
    /// first key under the writer's 16 bytes and the first compacted range; `nil` when neither
    /// is there. The row is one seek whatever the file holds; the range one seek and at most
    /// ``CompactedIdentities/maxKeysPassedOver`` steps.
    private func nextTaken(after counter: UInt64, _ txn: borrowing Transaction, _ dbs: Databases) throws -> ClosedRange<UInt64>? {
        guard counter < .max else { return nil }
        var row: UInt64?
        let origin = writer.bytes
        try txn.scanInPlace(dbs.dots, from: origin.appendingBigEndian(counter + 1)) { key, _ in
            // Keys sort by their bytes, so the first key from here under the writer's 16 bytes
            // has a counter field no greater than its next row's. A key of another kind whose
            // bytes begin like the writer's id (an `R` or `O` key) then costs a free counter,
            // never a walk over every such key; a key too short to hold one is a damaged file
            // (the insert of a taken identity then fails with an error).
            guard key.count >= 24, key[0..<16].elementsEqual(origin) else { return false }
            row = UInt64(bigEndian: key.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
            return false
        }
        let range = try CompactedIdentities.next(origin: writer, after: counter, txn, dbs)
        guard let row else { return range }
        guard let range, range.lowerBound <= row else { return row...row }
        return range
    }
}
