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
        let scratch = path + "/.compact-\(UInt64.random(in: 0...UInt64.max))"
        guard mkdir(scratch, 0o700) == 0 else { throw LMDBError(code: errno) }
        defer {
            unlink(scratch + "/data.mdb")
            unlink(scratch + "/lock.mdb")
            rmdir(scratch)
        }
        let stamp: timespec?
        do {
            let environment = try Environment(path: path)
            let before = environment.lastTransactionID
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
            now.tv_sec == stamp.tv_sec, now.tv_nsec == stamp.tv_nsec
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
}
