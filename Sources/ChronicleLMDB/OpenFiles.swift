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
///
/// A claim keeps the directory open until it is released. Directories are told apart by device
/// and inode, and a file system may give a directory created later the inode of one deleted
/// meanwhile (ext4 does); an open directory's inode is never free, so no directory created
/// while an environment lives can be taken for the deleted one it was opened on.
enum OpenFiles {
    struct FileID: Hashable, Sendable {
        var device: UInt64
        var inode: UInt64
    }

    /// A directory claimed for one environment, and the descriptor that keeps its inode taken.
    struct Claim: Sendable {
        var file: FileID
        var descriptor: Int32
    }

    private static let claimed = Mutex<Set<FileID>>([])

    /// Claims the directory at `path` for one environment; waits a few seconds for an
    /// environment of it that is closing on another thread, then refuses.
    static func claim(_ path: String) throws -> Claim {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw LMDBError(code: errno, detail: "cannot open \(path)") }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            let code = errno
            close(descriptor)
            throw LMDBError(code: code, detail: "cannot examine \(path)")
        }
        let file = FileID(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
        for _ in 0..<5_000 {
            if claimed.withLock({ $0.insert(file).inserted }) { return Claim(file: file, descriptor: descriptor) }
            usleep(1_000)
        }
        close(descriptor)
        throw LMDBError(code: EBUSY, detail: "\(path) is already open in this process (open it once and share it)")
    }

    static func release(_ claim: Claim) {
        _ = claimed.withLock { $0.remove(claim.file) }
        close(claim.descriptor)
    }
}
