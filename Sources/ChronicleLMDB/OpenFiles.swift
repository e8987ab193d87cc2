import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The directories that have an environment open in this process: LMDB must never open one
/// file twice in a process (closing either handle drops the process's `fcntl` locks, and the
/// reader table goes wrong: `MDB_BAD_RSLOT`).
enum OpenFiles {
    struct FileID: Hashable, Sendable {
        var device: UInt64
        var inode: UInt64
    }

    private static let claimed = Mutex<Set<FileID>>([])

    /// Claims the directory at `path` for one environment; waits a few seconds for an
    /// environment of it that is closing on another thread, then refuses.
    static func claim(_ path: String) throws -> FileID {
        var status = stat()
        guard stat(path, &status) == 0 else { throw LMDBError(code: errno, detail: "cannot open \(path)") }
        let file = FileID(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
        for _ in 0..<5_000 {
            if claimed.withLock({ $0.insert(file).inserted }) { return file }
            usleep(1_000)
        }
        throw LMDBError(code: EBUSY, detail: "\(path) is already open in this process (open it once and share it)")
    }

    static func release(_ file: FileID) {
        _ = claimed.withLock { $0.remove(file) }
    }
}
