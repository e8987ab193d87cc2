import CBenchLMDB
import Foundation

/// Raw LMDB through its C API: the physical limit the store is compared with.
final class RawLMDB {
    var env: OpaquePointer?
    var dbi = MDB_dbi()
    var view = MDB_dbi()
    var reader: OpaquePointer?

    init(path: String) {
        mdb_env_create(&env)
        mdb_env_set_maxdbs(env, 4)
        mdb_env_set_mapsize(env, 4 << 30)
        mdb_env_open(env, path, UInt32(MDB_NOTLS), 0o600)
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
    func put(_ key: [UInt8], _ value: [UInt8], alsoView: Bool = false) {
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        put(txn, dbi, key, value)
        if alsoView { put(txn, view, key, value) }
        mdb_txn_commit(txn)
    }

    /// Many puts in one transaction.
    func batch(_ pairs: [([UInt8], [UInt8])]) {
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        for (key, value) in pairs { put(txn, dbi, key, value) }
        mdb_txn_commit(txn)
    }

    private func put(_ txn: OpaquePointer?, _ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8]) {
        var key = key
        var value = value
        key.withUnsafeMutableBytes { k in
            value.withUnsafeMutableBytes { v in
                var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                var vv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
                _ = mdb_put(txn, dbi, &kv, &vv, 0)
            }
        }
    }

    /// A point read with a reused (reset/renewed) read transaction, copying the value out.
    func get(_ key: [UInt8]) -> Int {
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
