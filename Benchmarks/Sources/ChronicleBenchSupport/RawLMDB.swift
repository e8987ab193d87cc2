internal import CGateLMDB

/// An environment at `path` as the store opens its own (`MDB_NOTLS`, a 4 GiB map, 0600).
func openEnvironment(_ path: String, databases: Int) -> OpaquePointer? {
    var env: OpaquePointer?
    mdb_env_create(&env)
    mdb_env_set_maxdbs(env, MDB_dbi(databases))
    mdb_env_set_mapsize(env, 4 << 30)
    mdb_env_open(env, path, UInt32(MDB_NOTLS), 0o600)
    return env
}

/// Stores `value` under `key` in `dbi`, through LMDB's C API.
func rawPut(_ txn: OpaquePointer?, _ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8], flags: Int32 = 0) {
    var key = key
    var value = value
    key.withUnsafeMutableBytes { k in
        value.withUnsafeMutableBytes { v in
            var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
            var vv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
            _ = mdb_put(txn, dbi, &kv, &vv, UInt32(flags))
        }
    }
}

/// Raw LMDB through its C API: the physical limit the store is compared with.
public final class RawLMDB {
    private var env: OpaquePointer?
    private var dbi = MDB_dbi()
    private var view = MDB_dbi()
    private var reader: OpaquePointer?

    /// An environment at `path` (an existing directory) with two databases.
    public init(path: String) {
        env = openEnvironment(path, databases: 4)
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        mdb_dbi_open(txn, "kv", UInt32(MDB_CREATE), &dbi)
        mdb_dbi_open(txn, "view", UInt32(MDB_CREATE), &view)
        mdb_txn_commit(txn)
    }

    deinit {
        if let reader { mdb_txn_abort(reader) }
        mdb_env_close(env)
    }

    /// One put per transaction (durable commit).
    public func put(_ key: [UInt8], _ value: [UInt8], alsoView: Bool = false) {
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        rawPut(txn, dbi, key, value)
        if alsoView { rawPut(txn, view, key, value) }
        mdb_txn_commit(txn)
    }

    /// Many puts in one transaction.
    public func batch(_ pairs: [([UInt8], [UInt8])]) {
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        for (key, value) in pairs { rawPut(txn, dbi, key, value) }
        mdb_txn_commit(txn)
    }

    /// A point read with a reused (reset/renewed) read transaction, copying the value out.
    public func get(_ key: [UInt8]) -> Int {
        if reader == nil { mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &reader) } else { mdb_txn_renew(reader) }
        var key = key
        var result = 0
        key.withUnsafeMutableBytes { k in
            var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
            var vv = MDB_val()
            if mdb_get(reader, dbi, &kv, &vv) == 0 {
                result = Array(UnsafeRawBufferPointer(start: vv.mv_data, count: vv.mv_size)).count
            }
        }
        mdb_txn_reset(reader)
        return result
    }
}

/// Raw LMDB doing the B-tree work a local event makes in a Chronicle store, with the same
/// databases, key and value sizes and flags (FORMAT.md sections 2, 4 and 5), and nothing else: no
/// encoding, hashing, locking or queueing. It is the floor the store's layout sets: Chronicle
/// against it is the cost of its code, it against one raw put the cost of the layout.
public final class EventLayoutLMDB {
    private var env: OpaquePointer?
    private var events = MDB_dbi(), dots = MDB_dbi(), latest = MDB_dbi(), previous = MDB_dbi()
    private var view = MDB_dbi(), meta = MDB_dbi()
    private var sequence: UInt64 = 0
    private let writer = [UInt8](repeating: 0xA5, count: 16)
    /// A log record of a small set: kind, an 80-byte event, the 32-byte chain hash.
    private let record = [UInt8](repeating: 1, count: 1 + 80 + 32)
    /// A view entry of a small set (section 5.1).
    private let entry = [UInt8](repeating: 2, count: 77)
    private let chain = [UInt8](repeating: 3, count: 32)

    /// An environment at `path` (an existing directory) with a store's databases.
    public init(path: String) {
        env = openEnvironment(path, databases: 16)
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        mdb_dbi_open(txn, "events", UInt32(MDB_CREATE), &events)
        mdb_dbi_open(txn, "dots", UInt32(MDB_CREATE), &dots)
        mdb_dbi_open(txn, "latest", UInt32(MDB_CREATE), &latest)
        mdb_dbi_open(txn, "previous", UInt32(MDB_CREATE), &previous)
        mdb_dbi_open(txn, "defaults", UInt32(MDB_CREATE), &view)
        mdb_dbi_open(txn, "meta", UInt32(MDB_CREATE), &meta)
        mdb_txn_commit(txn)
    }

    deinit { mdb_env_close(env) }

    /// One transaction setting `names` (one event each): what `write { }` or a durable set commits.
    public func commit(_ names: [[UInt8]]) {
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        // The head: read at the start, written at the end.
        for name in ["seq", "hlc", "chain"] { _ = get(txn, meta, Array(name.utf8)) }
        // The writer's next taken counter, looked up once a transaction (as a row and as a range).
        _ = get(txn, dots, writer + bigEndian(sequence + 1))
        _ = get(txn, dots, [0x52] + writer + bigEndian(sequence + 1))
        for name in names {
            sequence += 1
            let position = bigEndian(sequence)
            let dot = writer + position
            rawPut(txn, events, position, record, flags: MDB_APPEND)
            rawPut(txn, dots, dot, position, flags: MDB_NOOVERWRITE)
            let historyKey = [0, UInt8(name.count)] + name
            if let last = get(txn, latest, historyKey) { rawPut(txn, previous, position, last, flags: MDB_APPEND) }
            rawPut(txn, latest, historyKey, position)
            _ = get(txn, view, name)
            rawPut(txn, view, name, entry)
        }
        rawPut(txn, meta, Array("seq".utf8), bigEndian(sequence))
        rawPut(txn, meta, Array("counter".utf8), bigEndian(0))
        rawPut(txn, meta, Array("hlc".utf8), bigEndian(sequence))
        rawPut(txn, meta, Array("chain".utf8), chain)
        mdb_txn_commit(txn)
    }

    private func bigEndian(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

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
