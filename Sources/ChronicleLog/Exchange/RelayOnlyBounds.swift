import ChronicleFormat
package import ChronicleLMDB
import ChronicleSodium

/// Relay-only records: what a store that verifies nothing keeps to relay without judging it
/// (items of newer formats, second versions of identities), bounded in total and per source.
package struct RelayOnlyBounds: Sendable {
    /// What it reads and writes: the log's databases.
    let storage: LogStorage

    private var dbs: Databases { storage.dbs }
}

extension EventLog {
    package var relayOnly: RelayOnlyBounds { RelayOnlyBounds(storage: storage) }
}

extension RelayOnlyBounds {
    /// The most relay-only records (items this build cannot read, kept to relay by a store
    /// that verifies nothing) a store keeps, and their most bytes.
    package static let relayOnlyCapacity = 65_536
    package static let relayOnlyByteCapacity = 64 << 20
    /// The share of those one source (a peer, a file, HTTP pushes) may fill: a quarter.
    package static let relayOnlyPerSource = relayOnlyCapacity / 4
    package static let relayOnlyBytesPerSource = relayOnlyByteCapacity / 4
    package static let relayLimitDetail =
        "this store keeps at most 65,536 relay-only records and 64 MiB, a quarter of that per source; `chronicle compact --drop-relay-only` frees them"

    /// Whether one more relay-only record of `size` bytes from `source` fits this store's bounds
    /// (a store that verifies nothing keeps what it cannot judge only up to them, in total and
    /// per source); counts it in, and in `source`'s tally in `meta`, when it does.
    package func relayRoom(
        _ size: Int, source: String, _ space: inout (total: QuarantineSpace, source: QuarantineSpace)?, _ txn: borrowing Transaction
    ) throws -> Bool {
        if space == nil { space = (try relayOnlySpace(txn), try relaySourceTally(source, txn)) }
        guard var (total, perSource) = space, total.count < Self.relayOnlyCapacity, total.bytes + size <= Self.relayOnlyByteCapacity,
            perSource.count < Self.relayOnlyPerSource, perSource.bytes + size <= Self.relayOnlyBytesPerSource
        else { return false }
        total.count += 1
        total.bytes += size
        perSource.count += 1
        perSource.bytes += size
        space = (total, perSource)
        try txn.put(
            dbs.meta, key: MetaKey.relaySource(source),
            value: UInt64(perSource.count).bigEndianBytes + UInt64(perSource.bytes).bigEndianBytes + Array(source.utf8.prefix(1024)))
        return true
    }

    /// How many relay-only records `source` brought (kept in `meta` until they are dropped).
    package func relaySourceTally(_ source: String, _ txn: borrowing Transaction) throws -> QuarantineSpace {
        guard let value = try txn.get(dbs.meta, key: MetaKey.relaySource(source)), value.count >= 16,
            let count = UInt64(bigEndianBytes: Array(value[0..<8])), let bytes = UInt64(bigEndianBytes: Array(value[8..<16]))
        else { return QuarantineSpace(count: 0, bytes: 0) }
        return QuarantineSpace(count: Int(clamping: count), bytes: Int(clamping: bytes))
    }

    /// Every source's tally of relay-only records, by source.
    package func relaySourceTallies(_ txn: borrowing Transaction) throws -> [String: Int] {
        var tallies: [String: Int] = [:]
        try txn.scan(dbs.meta, from: MetaKey.relaySourcePrefix) { key, value in
            guard key.starts(with: MetaKey.relaySourcePrefix) else { return false }
            if value.count >= 16, let count = UInt64(bigEndianBytes: Array(value[0..<8])) {
                tallies[String(decoding: value[16...], as: UTF8.self), default: 0] += Int(clamping: count)
            }
            return true
        }
        return tallies
    }

    /// How many relay-only records the log holds, and their items' bytes (what ``relayRoom``
    /// counts of each and a source's tally holds).
    package func relayOnlySpace(_ txn: borrowing Transaction) throws -> QuarantineSpace {
        var sequences: [UInt64] = []
        try txn.scanInPlace(dbs.dots, from: [0x4F]) { key, value in
            guard key.first == 0x4F else { return false }
            if key.count == 33, let sequence = UInt64(bigEndianBytes: Array(value)) { sequences.append(sequence) }
            return true
        }
        var space = QuarantineSpace(count: sequences.count, bytes: 0)
        for sequence in sequences {
            guard let value = try txn.get(dbs.events, key: sequence.bigEndianBytes) else { continue }
            let item = (try? LogRecord(decoding: value, sequence: sequence)).flatMap { OpaqueEvent(relayRecord: $0.body) }
            space.bytes += item?.bytes.count ?? value.count
        }
        return space
    }
}
