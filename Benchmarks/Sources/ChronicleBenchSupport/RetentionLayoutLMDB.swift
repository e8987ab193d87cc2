internal import CGateLMDB

/// Raw LMDB doing the B-tree work of keys past their retention in a Chronicle store: each batch
/// writes one revision of every key (as ``EventLayoutLMDB`` does) and then drops each key's
/// oldest record in a transaction of its own, as the store's sweep does (FORMAT.md 4.5 and 5.4):
/// the key's history walked from `latest` down its `previous` links (how the layout finds its
/// oldest record), the winner's view entry read, the record read, its `dots` row deleted, its
/// link and the link to it deleted, the record replaced by a gap record joined with the gap
/// before it, and the identity's compacted range moved. Nothing else: no encoding, hashing,
/// MAC, locking or queueing. The floor a store's "write plus its eventual drop" is compared with.
public final class RetentionLayoutLMDB {
    private var env: OpaquePointer?
    private var events = MDB_dbi(), dots = MDB_dbi(), latest = MDB_dbi(), previous = MDB_dbi()
    private var view = MDB_dbi(), meta = MDB_dbi()
    private var sequence: UInt64 = 0
    private let writer = [UInt8](repeating: 0xA5, count: 16)
    private let record = [UInt8](repeating: 1, count: 1 + 80 + 32)
    private let gapRecord = [UInt8](repeating: 6, count: 1 + 1 + 8 + 32 + 32 + 32)
    private let entry = [UInt8](repeating: 2, count: 77)
    private let chain = [UInt8](repeating: 3, count: 32)
    /// Per key, its records' sequences, oldest first (what the links hold; kept to check the walk).
    private var histories: [[UInt64]] = []
    /// Where the gap record of the newest run of dropped records lies.
    private var gapEnd: UInt64?
    private let names: [[UInt8]]
    private let keep: Int

    /// An environment at `path` (an existing directory) holding `names`, each kept to `keep` revisions.
    public init(path: String, names: [[UInt8]], keep: Int) {
        self.names = names
        self.keep = keep
        histories = Array(repeating: [], count: names.count)
        env = openEnvironment(path, databases: 16)
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        for (name, dbi) in [("events", \RetentionLayoutLMDB.events), ("dots", \.dots), ("latest", \.latest), ("previous", \.previous), ("defaults", \.view), ("meta", \.meta)] {
            var opened = MDB_dbi()
            mdb_dbi_open(txn, name, UInt32(MDB_CREATE), &opened)
            self[keyPath: dbi] = opened
        }
        mdb_txn_commit(txn)
    }

    deinit { mdb_env_close(env) }

    /// Writes one revision of every key in one transaction, as a batch of the store does.
    public func write() {
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        for name in ["seq", "hlc", "chain"] { _ = get(txn, meta, Array(name.utf8)) }
        _ = get(txn, dots, writer + bigEndian(sequence + 1))
        for (index, name) in names.enumerated() {
            sequence += 1
            let position = bigEndian(sequence)
            rawPut(txn, events, position, record, flags: MDB_APPEND)
            rawPut(txn, dots, writer + position, position, flags: MDB_NOOVERWRITE)
            let historyKey = [0, UInt8(name.count)] + name
            if let last = get(txn, latest, historyKey) { rawPut(txn, previous, position, last, flags: MDB_APPEND) }
            rawPut(txn, latest, historyKey, position)
            _ = get(txn, view, name)
            rawPut(txn, view, name, entry)
            histories[index].append(sequence)
        }
        rawPut(txn, meta, Array("seq".utf8), bigEndian(sequence))
        rawPut(txn, meta, Array("hlc".utf8), bigEndian(sequence))
        rawPut(txn, meta, Array("chain".utf8), chain)
        mdb_txn_commit(txn)
    }

    /// Drops, in one transaction, each key's records beyond the newest `keep`.
    /// - Returns: the records dropped.
    @discardableResult
    public func drop() -> Int {
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        var cursor: OpaquePointer?
        mdb_cursor_open(txn, events, &cursor)
        var dropped = 0
        var counters: [UInt64] = []
        for (index, name) in names.enumerated() {
            // The walk from the newest record down the links: how the layout finds the oldest.
            // Each link read in place, into one key buffer (as cheap as LMDB allows).
            var walked = 0
            var link = get(txn, latest, [0, UInt8(name.count)] + name) ?? []
            while !link.isEmpty {
                walked += 1
                var found = false
                link.withUnsafeMutableBytes { k in
                    var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                    var vv = MDB_val()
                    if mdb_get(txn, previous, &kv, &vv) == 0, vv.mv_size == 8, let data = vv.mv_data {
                        k.copyMemory(from: UnsafeRawBufferPointer(start: data, count: 8))
                        found = true
                    }
                }
                if !found { break }
            }
            guard walked > keep, histories[index].count > keep else { continue }
            _ = get(txn, view, name)
            let oldest = histories[index].removeFirst()
            let above = histories[index][0]
            _ = get(txn, events, bigEndian(oldest))
            mdb_del(txn, dots, writer + bigEndian(oldest))
            mdb_del(txn, previous, bigEndian(oldest))
            mdb_del(txn, previous, bigEndian(above))
            // The gap record: joined with the run just before, which it replaces.
            _ = get(txn, events, bigEndian(oldest - 1))
            if gapEnd == oldest - 1 { mdb_del(txn, events, bigEndian(oldest - 1)) }
            var next = bigEndian(oldest + 1)
            next.withUnsafeMutableBytes { k in
                var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                var vv = MDB_val()
                _ = mdb_cursor_get(cursor, &kv, &vv, MDB_SET_RANGE)
            }
            rawPut(txn, events, bigEndian(oldest), gapRecord)
            gapEnd = oldest
            counters.append(oldest)
            dropped += 1
        }
        mdb_cursor_close(cursor)
        // The dropped identities: one compacted range row of the writer, moved.
        if let low = counters.min(), let high = counters.max() {
            let rangeKey = [0x52] + writer
            _ = get(txn, dots, rangeKey + bigEndian(low))
            mdb_del(txn, dots, rangeKey + bigEndian(low - 1))
            rawPut(txn, dots, rangeKey + bigEndian(high), bigEndian(1))
        }
        mdb_txn_commit(txn)
        return dropped
    }

    private func bigEndian(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

    private func mdb_del(_ txn: OpaquePointer?, _ dbi: MDB_dbi, _ key: [UInt8]) {
        var key = key
        key.withUnsafeMutableBytes { k in
            var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
            _ = CGateLMDB.mdb_del(txn, dbi, &kv, nil)
        }
    }

    private func get(_ txn: OpaquePointer?, _ dbi: MDB_dbi, _ key: [UInt8]) -> [UInt8]? {
        var key = key
        return key.withUnsafeMutableBytes { k in
            var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
            var vv = MDB_val()
            guard mdb_get(txn, dbi, &kv, &vv) == 0 else { return nil }
            return Array(UnsafeRawBufferPointer(start: vv.mv_data, count: vv.mv_size))
        }
    }
}
