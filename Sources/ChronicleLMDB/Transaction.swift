internal import CChronicleLMDB

/// One LMDB transaction, used inside ``Environment/read(_:)`` or ``Environment/write(_:)``.
///
/// A transaction is `~Copyable`: it has exactly one owner, and the environment
/// ends it (commit, abort or reset) when the closure it was lent to returns.
/// Every value it returns is copied out of the memory map, so nothing outlives
/// the transaction.
package struct Transaction: ~Copyable {
    let handle: OpaquePointer
    /// `true` for a read-only transaction.
    package let isReadOnly: Bool
    private let abortOnDeinit: Bool
    /// Set by every change, so the environment knows whether a commit writes a new transaction.
    /// Unretained (so the transaction stays trivially destroyable): ``Environment/write(_:)``
    /// owns the flag and outlives the transaction.
    private let changes: Unmanaged<ChangeFlag>?

    init(handle: OpaquePointer, isReadOnly: Bool, abortOnDeinit: Bool, changes: ChangeFlag? = nil) {
        self.handle = handle
        self.isReadOnly = isReadOnly
        self.abortOnDeinit = abortOnDeinit
        self.changes = changes.map { Unmanaged.passUnretained($0) }
    }

    private func noteChange() { changes?.takeUnretainedValue().isSet = true }

    deinit {
        if abortOnDeinit { mdb_txn_abort(handle) }
    }

    /// Commits and ends the transaction.
    consuming func commit() throws(LMDBError) {
        let handle = self.handle
        discard self
        try check(mdb_txn_commit(handle))
    }

    /// This transaction's id (for a read transaction, the snapshot it sees).
    package var id: Int { Int(mdb_txn_id(handle)) }

    // MARK: - Reading

    /// The value stored under `key`, copied out, or `nil` when absent.
    package func get(_ database: Database, key: [UInt8]) throws -> [UInt8]? {
        var found: [UInt8]?
        try withValue(database, key: .array(key)) { bytes in found = Array(bytes) }
        return found
    }

    /// Calls `body` with the bytes stored under `key`, if any, without copying them.
    ///
    /// The buffer is valid only during `body`.
    /// - Returns: `true` when the key was found and `body` ran.
    @discardableResult
    package func withValue(
        _ database: Database, key: [UInt8], _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Bool {
        try withValue(database, key: .array(key), body)
    }

    /// `withValue(_:key:_:)` for a key lent in place.
    @discardableResult
    package func withValue(
        _ database: Database, key: LMDBBytes, _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Bool {
        var value = MDB_val()
        let rc = key.withBytes { key in
            var keyVal = MDB_val(key)
            return mdb_get(handle, database.dbi, &keyVal, &value)
        }
        if rc == MDB_NOTFOUND { return false }
        try check(rc)
        try body(UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size))
        return true
    }

    /// The number of entries in `database`.
    package func count(_ database: Database) throws -> Int {
        var stat = MDB_stat()
        try check(mdb_stat(handle, database.dbi, &stat))
        return Int(stat.ms_entries)
    }

    /// The pages `database`'s B-tree occupies (branch, leaf and overflow pages): what its
    /// records cost in the file, whatever the file's high-water mark.
    package func pages(_ database: Database) throws -> Int {
        var stat = MDB_stat()
        try check(mdb_stat(handle, database.dbi, &stat))
        return Int(stat.ms_branch_pages + stat.ms_leaf_pages + stat.ms_overflow_pages)
    }

    /// Visits key/value pairs in key order, starting at the first key greater
    /// than or equal to `start` (or at the beginning), until `body` returns `false`.
    package func scan(
        _ database: Database,
        from start: [UInt8]? = nil,
        _ body: ([UInt8], [UInt8]) throws -> Bool
    ) throws {
        try scanInPlace(database, from: start) { key, value in try body(Array(key), Array(value)) }
    }

    /// Like ``scan(_:from:_:)``, but lends the key and value in place, without copying them.
    ///
    /// The buffers point into the memory map and are valid only during `body`.
    package func scanInPlace(
        _ database: Database,
        from start: [UInt8]? = nil,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try withCursor(database) { cursor throws in
            var key = MDB_val()
            var value = MDB_val()
            let rc: Int32
            if let start {
                rc = start.withMDBVal { startVal in
                    key = startVal
                    return mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE)
                }
            } else {
                rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
            }
            try walk(cursor, &key, &value, from: rc, step: MDB_NEXT, body)
        }
    }

    /// Visits key/value pairs in descending key order, starting at the greatest key less than
    /// `end`, until `body` returns `false`. The buffers are valid only during `body`.
    package func scanBackwardInPlace(
        _ database: Database,
        before end: [UInt8],
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try withCursor(database) { cursor throws in
            var key = MDB_val()
            var value = MDB_val()
            let found = end.withMDBVal { endVal in
                key = endVal
                return mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE)
            }
            // At the first key at or after `end` (step back once), or past the last key.
            let rc = found == 0 ? mdb_cursor_get(cursor, &key, &value, MDB_PREV) : found == MDB_NOTFOUND ? mdb_cursor_get(cursor, &key, &value, MDB_LAST) : found
            try walk(cursor, &key, &value, from: rc, step: MDB_PREV, body)
        }
    }

    /// Lends the pair the cursor is at (when `rc` says it found one) to `body`, then steps with
    /// `step` and lends the next, until `body` returns `false` or the cursor runs out.
    private func walk(
        _ cursor: OpaquePointer, _ key: inout MDB_val, _ value: inout MDB_val, from rc: Int32, step: MDB_cursor_op,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        var rc = rc
        while rc == 0 {
            let keyBuffer = UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size)
            let valueBuffer = UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size)
            guard try body(keyBuffer, valueBuffer) else { return }
            rc = mdb_cursor_get(cursor, &key, &value, step)
        }
        if rc != MDB_NOTFOUND { try check(rc) }
    }

    /// The last key/value pair of `database` in key order, or `nil` when it is empty.
    package func last(_ database: Database) throws -> (key: [UInt8], value: [UInt8])? {
        var result: (key: [UInt8], value: [UInt8])?
        try withCursor(database) { cursor throws in
            var key = MDB_val()
            var value = MDB_val()
            let rc = mdb_cursor_get(cursor, &key, &value, MDB_LAST)
            if rc == MDB_NOTFOUND { return }
            try check(rc)
            result = (
                Array(UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size)),
                Array(UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size))
            )
        }
        return result
    }

    private func withCursor(_ database: Database, _ body: (OpaquePointer) throws -> Void) throws {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(handle, database.dbi, &cursor))
        guard let cursor else { throw LMDBError(code: EINVAL_CODE) }
        defer { mdb_cursor_close(cursor) }
        try body(cursor)
    }

    // MARK: - Writing

    /// Stores `value` under `key`.
    package func put(_ database: Database, key: [UInt8], value: [UInt8], flags: PutFlags = []) throws {
        try put(database, key: .array(key), value: .array(value), flags: flags)
    }

    /// `put(_:key:value:flags:)` for a key and a value lent in place.
    package func put(_ database: Database, key: LMDBBytes, value: LMDBBytes, flags: PutFlags = []) throws {
        let rc = key.withBytes { key in
            value.withBytes { value in
                var keyVal = MDB_val(key)
                var valueVal = MDB_val(value)
                return mdb_put(handle, database.dbi, &keyVal, &valueVal, flags.rawValue)
            }
        }
        try check(rc)
        noteChange()
    }

    /// Stores `value` under `key` unless the key exists.
    /// - Returns: `false` when the key was already present (nothing is written).
    package func insert(_ database: Database, key: [UInt8], value: [UInt8]) throws -> Bool {
        try insert(database, key: .array(key), value: .array(value))
    }

    /// `insert(_:key:value:)` for a key and a value lent in place.
    package func insert(_ database: Database, key: LMDBBytes, value: LMDBBytes) throws -> Bool {
        do {
            try put(database, key: key, value: value, flags: .noOverwrite)
            return true
        } catch let error as LMDBError where error == .keyExists {
            return false
        }
    }

    /// Deletes `key`.
    /// - Returns: `false` when the key was absent.
    @discardableResult
    package func delete(_ database: Database, key: [UInt8]) throws -> Bool {
        let rc = key.withMDBVal { keyVal in
            mdb_del(handle, database.dbi, &keyVal, nil)
        }
        if rc == MDB_NOTFOUND { return false }
        try check(rc)
        noteChange()
        return true
    }

    /// Deletes every entry of `database`, keeping the database itself.
    package func clear(_ database: Database) throws {
        try check(mdb_drop(handle, database.dbi, 0))
        noteChange()
    }
}

/// Whether a transaction changed anything. A class so that a borrowed transaction can set it;
/// a transaction (and so its flag) is used by one thread at a time.
final class ChangeFlag {
    var isSet = false
}

/// `EINVAL`, spelled without importing Glibc into this file.
let EINVAL_CODE: Int32 = 22

extension MDB_val {
    /// Lends `bytes` to LMDB. LMDB never writes through a key or a value it is given.
    init(_ bytes: UnsafeRawBufferPointer) {
        // Empty bytes may have no base address; LMDB reads no byte of a zero-length value.
        self.init(mv_size: bytes.count, mv_data: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
    }
}

extension Array where Element == UInt8 {
    /// Lends the array's bytes to LMDB as an `MDB_val`. LMDB never writes through it.
    @inline(__always)
    func withMDBVal<R>(_ body: (inout MDB_val) throws -> R) rethrows -> R {
        try withUnsafeBytes { buffer in
            var val = MDB_val(buffer)
            return try body(&val)
        }
    }
}
