internal import CChronicleLMDB
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension Environment {
    /// Shrinks the environment in the directory at `path` to its pages in use:
    /// a compacting copy into a scratch directory, then an atomic `rename` over `data.mdb`.
    ///
    /// Refuses (`EBUSY`) while another process has the environment open, and changes nothing
    /// when another process opened it or wrote to it while the copy ran. LMDB's lock file
    /// describes the data file it was set up for, so the file is only replaced while no other
    /// process is attached: every process with the environment open holds LMDB's shared `fcntl`
    /// lock on byte 0 of `lock.mdb`; this function takes that byte exclusively for the
    /// `rename` (an opener then waits in `mdb_env_open`), and before letting go opens the new
    /// file itself, which (exclusive in this process) sets the lock file up for the new file.
    /// This process must not have the environment open (the caller checks).
    /// - Parameters:
    ///   - prepare: called with the scratch directory holding the compacted copy before it
    ///     replaces the file (to record what must be true of the new file from its first moment).
    ///   - replaced: called once the new file is in place, while no other process can attach.
    package static func compactFile(at path: String, prepare: (String) throws -> Void = { _ in }, replaced: () -> Void = {}) throws {
        let busy = LMDBError(code: EBUSY, detail: "another process has the store open, or opened it meanwhile; stop it (the app, `chronicle serve`, …) and try again")
        // One descriptor for every probe, closed last: closing a descriptor of lock.mdb drops
        // every fcntl lock this process holds on it.
        let probe = open(path + "/lock.mdb", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard probe >= 0 else { throw LMDBError(code: errno, detail: "cannot open \(path)/lock.mdb") }
        defer { close(probe) }
        func lock(_ command: Int32, _ type: Int32) -> flock {
            var request = flock()
            request.l_type = Int16(type)
            request.l_whence = Int16(SEEK_SET)
            request.l_start = 0
            request.l_len = 1
            if fcntl(probe, command, &request) != 0 { request.l_type = -1 }
            return request
        }
        // F_GETLK reports a lock that conflicts with ours only when another process holds it.
        guard lock(F_GETLK, F_WRLCK).l_type == Int16(F_UNLCK) else { throw busy }
        func modified() -> timespec? {
            var status = stat()
            guard stat(path + "/data.mdb", &status) == 0 else { return nil }
            #if canImport(Darwin)
            return status.st_mtimespec
            #else
            return status.st_mtim
            #endif
        }
        removeAbandonedScratch(in: path)
        let scratch = path + "/.compact-\(UInt64.random(in: 0...UInt64.max))"
        guard mkdir(scratch, 0o700) == 0 else { throw LMDBError(code: errno) }
        defer {
            unlink(scratch + "/data.mdb")
            unlink(scratch + "/lock.mdb")
            rmdir(scratch)
        }
        let stamp: timespec?
        let before: Int
        do {
            let environment = try Environment(path: path)
            before = environment.lastTransactionID
            try environment.copy(to: scratch, compact: true)
            let copy = open(scratch + "/data.mdb", O_RDWR | O_CLOEXEC | O_NOFOLLOW)
            guard copy >= 0 else { throw LMDBError(code: errno) }
            defer { close(copy) }
            // mdb_env_copy2 creates the file 0666 & ~umask; a store's files are 0600.
            guard fchmod(copy, 0o600) == 0 else { throw LMDBError(code: errno) }
            try prepare(scratch)
            guard fsync(copy) == 0 else { throw LMDBError(code: errno) }
            // Someone wrote while the copy ran: the copy may miss it, so the old file stays.
            guard environment.lastTransactionID == before else { throw busy }
            stamp = modified()
        }  // this process's environment is closed here
        // Nobody else attached (else the exclusive lock fails), and nobody wrote since the check
        // (a commit rewrites a meta page): then replace the file while openers wait.
        guard lock(F_SETLK, F_WRLCK).l_type == Int16(F_WRLCK), let stamp, let now = modified(),
            now.tv_sec == stamp.tv_sec, now.tv_nsec == stamp.tv_nsec,
            // A process that attached, committed and left between the copy's end and the lock
            // moved the file's last transaction id (a modification time can miss it within a tick).
            committedTransactionID(dataFile: path + "/data.mdb") == UInt64(before)
        else { throw busy }
        guard rename(scratch + "/data.mdb", path + "/data.mdb") == 0 else { throw LMDBError(code: errno) }
        let directory = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            _ = fsync(directory)
            close(directory)
        }
        replaced()
        // Opened here, while this process holds the lock, LMDB sets lock.mdb up afresh for the
        // new file (as the first opener), then shares it: waiting openers go on with that.
        _ = try Environment(path: path)
    }

    /// The id of the last transaction committed to the data file `dataFile`, read from its two
    /// meta pages without attaching to the environment (LMDB's layout: a 16-byte page header,
    /// then `MDB_meta`, whose magic is at 0, the free DB's `md_pad` (the page size) at 24 and
    /// `mm_txnid` at 128); `nil` when the file cannot be read as LMDB's.
    static func committedTransactionID(dataFile: String) -> UInt64? {
        let descriptor = open(dataFile, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        func meta(at offset: Int) -> (pageSize: UInt32, transaction: UInt64)? {
            var bytes = [UInt8](repeating: 0, count: 160)
            guard pread(descriptor, &bytes, bytes.count, off_t(offset)) == bytes.count else { return nil }
            func load<T: FixedWidthInteger>(_ at: Int, as: T.Type) -> T {
                bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: at, as: T.self)) }
            }
            guard load(16, as: UInt32.self) == 0xBEEF_C0DE else { return nil }
            return (load(40, as: UInt32.self), load(144, as: UInt64.self))
        }
        guard let first = meta(at: 0), first.pageSize >= 512, let second = meta(at: Int(first.pageSize)) else { return nil }
        return max(first.transaction, second.transaction)
    }

    /// Deletes scratch directories a compaction left when its process died mid-copy. Called only
    /// once no other process is attached, so no compaction of another process is running.
    private static func removeAbandonedScratch(in path: String) {
        guard let directory = opendir(path) else { return }
        var entries: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            entries.append(name)
        }
        closedir(directory)
        for entry in entries where entry.hasPrefix(".compact-") {
            let scratch = path + "/" + entry
            unlink(scratch + "/data.mdb")
            unlink(scratch + "/lock.mdb")
            rmdir(scratch)
        }
    }
}
