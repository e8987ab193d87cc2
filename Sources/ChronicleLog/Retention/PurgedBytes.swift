import ChronicleLMDB
import Foundation
package import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The bytes of revisions a purge dropped: LMDB keeps a freed page's bytes until a later write
/// reuses it (and an open reader pins the pages it sees), so after `purge-history` the data file
/// still holds the purged values, sealed ones as ciphertext the data key opens. A compacting copy
/// of the environment (`mdb_env_copy2`: live pages only, every key and sequence as it was) holds
/// none of them; it replaces the file only while no other process has the store open.
///
/// A purge leaves `erase.pending` in the store's directory (before it commits, so a crash never
/// loses the mark); the next opening of the store by a process that finds no other process
/// attached rewrites the file and removes the mark, and so does ``Inspection/reclaimSpace(path:)``.
/// An opening that finds another process attached leaves the mark for a later one.
package enum PurgedBytes {
    /// The mark's file name, in the store's directory (docs/FORMAT.md 2).
    package static let markName = "erase.pending"

    /// Leaves the mark; returns whether it was already there.
    @discardableResult
    package static func mark(path: String) throws -> Bool {
        let file = path + "/" + markName
        let descriptor = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            if errno == EEXIST { return true }
            throw LMDBError(code: errno, detail: "cannot create \(file)")
        }
        _ = fsync(descriptor)
        close(descriptor)
        let directory = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            _ = fsync(directory)
            close(directory)
        }
        return false
    }

    /// Whether a purge left the mark.
    package static func isMarked(path: String) -> Bool {
        access(path + "/" + markName, F_OK) == 0
    }

    /// Removes the mark (after the file was rewritten, or a purge that dropped nothing).
    package static func clear(path: String) {
        unlink(path + "/" + markName)
    }

    /// At an opening, before the log opens: rewrites the file when a purge left the mark and no
    /// other process has the store open. Never fails the opening: a busy store keeps the mark,
    /// and any other failure is logged and keeps it too.
    package static func eraseIfMarked(path: String, logger: Logger) {
        guard isMarked(path: path) else { return }
        do {
            try Inspection.reclaimSpace(path: path)  // clears the mark while no other process can attach
            logger.info("chronicle: rewrote the data file, so purged revisions are gone from it", metadata: ["store": "\(path)"])
        } catch let error as LMDBError where error.code == EBUSY {
            logger.debug("chronicle: purged revisions stay in free pages while another process has the store open", metadata: ["store": "\(path)"])
        } catch {
            logger.warning(
                "chronicle: could not rewrite the data file to erase purged revisions; the next opening tries again",
                metadata: ["store": "\(path)", "error": "\(error)"])
        }
    }
}
