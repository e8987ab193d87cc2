internal import CChronicleLMDB
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Options for opening an ``Environment``.
package struct EnvironmentOptions: Sendable {
    /// Initial map size in bytes (address space only; the environment grows it when full).
    package var mapSize: Int = 1 << 30
    /// Maximum number of named databases.
    package var maxDatabases: UInt32 = 16
    /// Maximum number of concurrent readers across every process using the environment.
    package var maxReaders: UInt32 = 1022
    /// `MDB_NOMETASYNC`: data pages are synced at commit, the meta page is not. A power loss
    /// can undo the last committed transaction, never corrupt the file.
    package var noMetaSync = false
    /// `MDB_NOSYNC`: nothing is synced at commit; the operating system writes back when it
    /// likes. A crash of the process loses nothing; a power loss can lose every commit since
    /// the last ``Environment/flush()`` and, on file systems that reorder writes, damage the file.
    package var noSync = false
    /// The permission bits of the data and lock files.
    package var fileMode: UInt32 = 0o600

    /// Creates the default options.
    package init() {}
}

/// An open LMDB environment: one memory-mapped file holding named databases.
///
/// Open each file once per process: a second `mdb_env_open` of the same file
/// in one process breaks LMDB's locks, so `init` refuses it (after waiting briefly
/// for one that is closing on another thread). Readers run concurrently with the
/// single writer; every transaction holds a process-wide reader-writer lock
/// shared, and growing the map takes it exclusively.
///
/// `@unchecked Sendable` is safe here: the `MDB_env` pointer is set once and
/// `mdb_env_*` calls are thread-safe; read transactions are `MDB_NOTLS` and
/// each is used by one thread at a time (taken from and returned to the
/// `Mutex`-guarded pool); write transactions live inside one ``write(_:)`` call
/// on one thread; map size changes run under the exclusive lock, when no
/// transaction of this process is active, as LMDB requires.
package final class Environment: @unchecked Sendable {
    private let env: OpaquePointer
    private let lock = ReadWriteLock()
    private let idleReaders = Mutex<[IdleReader]>([])
    /// Ids of the latest transactions this environment committed (a short history, oldest first).
    private let ownCommits = Mutex<[Int]>([])
    private static let rememberedCommits = 256
    private static let maxIdleReaders = 64
    /// The filesystem path of the environment's directory.
    package let path: String
    /// Whether every commit is synced whole (neither `noMetaSync` nor `noSync` was asked for).
    package let syncsEveryCommit: Bool
    /// The directory's identity, claimed for this environment in ``OpenFiles``.
    private let file: OpenFiles.Claim

    /// Opens (creating if needed) the environment in the directory at `path`.
    ///
    /// The directory must exist. Stale reader slots left by dead processes are
    /// cleared on open.
    /// - Throws: ``LMDBError`` when the file cannot be opened.
    package init(path: String, options: EnvironmentOptions = .init()) throws {
        let file = try OpenFiles.claim(path)
        do {
            (env, self.path, syncsEveryCommit) = try Self.openHandle(path: path, options: options)
        } catch {
            OpenFiles.release(file)
            throw error
        }
        self.file = file
        var dead: Int32 = 0
        _ = mdb_reader_check(env, &dead)
    }

    private static func openHandle(path: String, options: EnvironmentOptions) throws -> (OpaquePointer, String, Bool) {
        var handle: OpaquePointer?
        try check(mdb_env_create(&handle))
        guard let handle else { throw LMDBError(code: EINVAL_CODE) }
        var flags = UInt32(MDB_NOTLS)
        if options.noMetaSync { flags |= UInt32(MDB_NOMETASYNC) }
        if options.noSync { flags |= UInt32(MDB_NOSYNC) }
        do {
            try check(mdb_env_set_maxdbs(handle, MDB_dbi(options.maxDatabases)))
            try check(mdb_env_set_maxreaders(handle, options.maxReaders))
            try check(mdb_env_set_mapsize(handle, options.mapSize))
            try check(mdb_env_open(handle, path, flags, mdb_mode_t(options.fileMode)))
        } catch {
            mdb_env_close(handle)
            throw error
        }
        // A data file shorter than its own meta page says would fault (SIGBUS) on the first
        // access to a missing page: refuse it here, with a clear error.
        var info = MDB_envinfo()
        var pageStat = MDB_stat()
        mdb_env_info(handle, &info)
        mdb_env_stat(handle, &pageStat)
        let pageSize = Int(pageStat.ms_psize)
        let needed = (info.me_last_pgno + 1) * pageSize
        var fileStatus = stat()
        if stat(path + "/data.mdb", &fileStatus) == 0, Int(fileStatus.st_size) < needed {
            // LMDB never writes a page it allocated and freed in the same transaction (a "loose"
            // page, which it puts on the freelist), so a sound file may end before its last page
            // number when those pages are at its end: deletes do that. The file is sound when every
            // missing page is free. It is extended first (zeros: a read of a missing page then
            // finds a page of the wrong type, not a fault), and cut back when it is not sound.
            let present = Int(fileStatus.st_size) / pageSize
            let file = path + "/data.mdb"
            guard Self.extend(file, to: needed), Self.pagesAreFree(present...info.me_last_pgno, handle) else {
                _ = truncate(file, fileStatus.st_size)
                mdb_env_close(handle)
                throw LMDBError(
                    code: MDB_CORRUPTED,
                    detail: "data.mdb is \(fileStatus.st_size) bytes but its pages reach \(needed) (truncated)")
            }
        }
        return (handle, path, !options.noMetaSync && !options.noSync)
    }

    /// Whether every page in `pages` is on the environment's freelist (read as `mdb_stat -f`
    /// does: the free database's records are page-number lists, a count first, native-endian).
    private static func pagesAreFree(_ pages: ClosedRange<Int>, _ env: OpaquePointer) -> Bool {
        var missing = Set(pages)
        guard missing.count <= 1 << 20 else { return false }
        var txn: OpaquePointer?
        guard mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn) == 0, let txn else { return false }
        defer { mdb_txn_abort(txn) }
        var cursor: OpaquePointer?
        guard mdb_cursor_open(txn, 0, &cursor) == 0, let cursor else { return false }  // dbi 0: the freelist
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val()
        var value = MDB_val()
        var rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
        let width = MemoryLayout<Int>.size
        while rc == 0, !missing.isEmpty {
            let list = UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size)
            if list.count >= width {
                let count = list.loadUnaligned(as: Int.self)
                if count >= 0, count <= list.count / width - 1 {
                    for index in 0..<count { missing.remove(list.loadUnaligned(fromByteOffset: (index + 1) * width, as: Int.self)) }
                }
            }
            rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
        }
        return missing.isEmpty
    }

    /// Extends the file at `path` to at least `size` bytes (never shrinks it).
    private static func extend(_ path: String, to size: Int) -> Bool {
        let descriptor = open(path, O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return false }
        if Int(status.st_size) >= size { return true }
        return posix_fallocate(descriptor, 0, off_t(size)) == 0 && fsync(descriptor) == 0
    }

    deinit {
        for reader in idleReaders.withLock({ $0 }) { mdb_txn_abort(reader.handle) }
        mdb_env_close(env)
        OpenFiles.release(file)
    }

    // MARK: - Databases

    /// Opens the named database, creating it when absent.
    package func openDatabase(named name: String) throws -> Database {
        // Its own transaction, always committed: a handle opened in an aborted transaction is
        // closed again, and `write` aborts transactions that changed no entry.
        try lock.withShared {
            var handle: OpaquePointer?
            try check(mdb_txn_begin(env, nil, 0, &handle))
            guard let handle else { throw LMDBError(code: EINVAL_CODE) }
            var dbi = MDB_dbi()
            let rc = mdb_dbi_open(handle, name, UInt32(MDB_CREATE), &dbi)
            guard rc == 0 else {
                mdb_txn_abort(handle)
                throw LMDBError(code: rc)
            }
            try check(mdb_txn_commit(handle))
            return Database(dbi: dbi, name: name)
        }
    }

    // MARK: - Transactions

    /// Runs `body` in a read-only transaction that sees one consistent snapshot.
    ///
    /// Read transactions are reused (`mdb_txn_reset`/`mdb_txn_renew`); never
    /// hold the transaction across an `await`.
    package func read<R>(_ body: (borrowing Transaction) throws -> R) throws -> R {
        while true {
            do {
                return try lock.withShared {
                    let handle = try takeReader()
                    do {
                        let txn = Transaction(handle: handle, isReadOnly: true, abortOnDeinit: false)
                        let result = try body(txn)
                        returnReader(handle)
                        return result
                    } catch {
                        returnReader(handle)
                        throw error
                    }
                }
            } catch let error as LMDBError where error == .mapResized {
                try adoptMapSize()
            }
        }
    }

    /// Runs `body` in a write transaction and commits it when `body` returns.
    ///
    /// When `body` throws, the transaction is aborted and nothing is written.
    /// When the map is full, the transaction is aborted, the map grows and
    /// `body` runs again, so `body` must derive everything from the
    /// transaction it is given (it may run more than once). Call from one
    /// thread with no `await` inside: LMDB binds write transactions to threads.
    package func write<R>(_ body: (borrowing Transaction) throws -> R) throws -> R {
        while true {
            do {
                return try lock.withShared {
                    var handle: OpaquePointer?
                    try check(mdb_txn_begin(env, nil, 0, &handle))
                    guard let handle else { throw LMDBError(code: EINVAL_CODE) }
                    let changes = ChangeFlag()
                    let txn = Transaction(handle: handle, isReadOnly: false, abortOnDeinit: true, changes: changes)
                    let result = try body(txn)
                    // A transaction that changed nothing is aborted: it would write no new
                    // transaction anyway, and its id would be the next writer's.
                    guard changes.isSet else { return result }
                    // Remembered as this process's before the commit makes it visible: a poller
                    // that reads the new transaction id between the two must not take it for
                    // another process's commit (its observers would re-read a value this
                    // process's commit feed has not delivered yet, out of order).
                    let id = txn.id
                    ownCommits.withLock { ids in
                        ids.append(id)
                        if ids.count > Self.rememberedCommits { ids.removeFirst(ids.count - Self.rememberedCommits) }
                    }
                    do {
                        try txn.commit()
                    } catch {
                        ownCommits.withLock { ids in ids.removeAll { $0 == id } }  // the next writer, of any process, takes the id
                        throw error
                    }
                    return withExtendedLifetime(changes) { result }
                }
            } catch let error as LMDBError where error == .mapFull {
                try growMap()
            } catch let error as LMDBError where error == .mapResized {
                try adoptMapSize()
            }
        }
    }

    /// Whether the calling thread is inside a transaction (or another call holding the
    /// environment's lock) of this environment: starting another would be a nested
    /// transaction, which debug builds stop at.
    package var isLockHeldByCurrentThread: Bool { lock.isHeldByCurrentThread }

    private func takeReader() throws -> OpaquePointer {
        if let reader = idleReaders.withLock({ $0.popLast() })?.handle {
            let rc = mdb_txn_renew(reader)
            if rc == 0 { return reader }
            mdb_txn_abort(reader)
            try check(rc)
        }
        var handle: OpaquePointer?
        try check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &handle))
        guard let handle else { throw LMDBError(code: EINVAL_CODE) }
        return handle
    }

    private func returnReader(_ handle: OpaquePointer) {
        mdb_txn_reset(handle)
        let kept = idleReaders.withLock { readers in
            guard readers.count < Self.maxIdleReaders else { return false }
            readers.append(IdleReader(handle: handle))
            return true
        }
        if !kept { mdb_txn_abort(handle) }
    }

    // MARK: - Map size

    /// The current map size in bytes.
    package var mapSize: Int {
        lock.withShared { info().me_mapsize }
    }

    /// The id of the last committed transaction of any process (a read of the meta page).
    ///
    /// It changes exactly when some process commits, so it tells cheaply
    /// whether anything may have changed since a value was read.
    package var lastTransactionID: Int {
        lock.withShared { info().me_last_txnid }
    }

    /// Whether a transaction committed with an id in `(after, through]` came from elsewhere
    /// (another process, or another environment on the file): `false` when they are all this
    /// environment's own commits. Beyond its short memory of own commits it answers `true`.
    package func othersCommitted(after: Int, through: Int) -> Bool {
        guard through > after else { return false }
        guard through - after <= Self.rememberedCommits else { return true }
        let own = ownCommits.withLock { Set($0) }
        return ((after + 1)...through).contains { !own.contains($0) }
    }

    private func info() -> MDB_envinfo {
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return info
    }

    private func growMap() throws {
        let done: Void? = try lock.withExclusive {
            let current = info().me_mapsize
            let next = current < (1 << 30) ? current * 2 : current + (1 << 30)
            try check(mdb_env_set_mapsize(env, next))
        }
        guard done != nil else { throw Self.nestedTransaction }
    }

    private func adoptMapSize() throws {
        let done: Void? = try lock.withExclusive { try check(mdb_env_set_mapsize(env, 0)) }
        guard done != nil else { throw Self.nestedTransaction }
    }

    /// A map change asked for inside one of this thread's transactions (it would deadlock).
    private static let nestedTransaction = LMDBError(code: EDEADLK, detail: "a transaction was started inside another on one thread")

    // MARK: - Maintenance

    /// Flushes committed data to disk (`mdb_env_sync` with force), for the
    /// non-durable sync modes.
    package func flush() throws {
        try check(mdb_env_sync(env, 1))
    }

    /// Clears reader slots left by processes that died.
    /// - Returns: the number of slots cleared.
    @discardableResult
    package func clearStaleReaders() throws -> Int {
        var dead: Int32 = 0
        try check(mdb_reader_check(env, &dead))
        return Int(dead)
    }

    /// Writes a copy of the environment into the (existing, empty) directory at `path`.
    /// - Parameter compact: omit free pages and renumber them, so the copy is as small as possible.
    package func copy(to path: String, compact: Bool) throws {
        try lock.withShared {
            try check(mdb_env_copy2(env, path, compact ? UInt32(MDB_CP_COMPACT) : 0))
        }
    }

    /// The size in bytes of the environment's data that is in use (last page × page size).
    package var usedBytes: Int {
        lock.withShared {
            var stat = MDB_stat()
            mdb_env_stat(env, &stat)
            return (info().me_last_pgno + 1) * Int(stat.ms_psize)
        }
    }
}

/// A reset read transaction waiting in the pool.
///
/// `@unchecked Sendable` is safe here: a reset `MDB_NOTLS` read transaction
/// belongs to no thread, and the pool hands each one to exactly one caller at a
/// time (it is removed from the array under the mutex before use).
private struct IdleReader: @unchecked Sendable {
    let handle: OpaquePointer
}
