package import ChronicleFormat
package import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Files and folders only their owner can read: every file Chronicle writes is 0600
/// and every folder it creates 0700, whatever the process's umask.
///
/// This uses the C library's `open`/`link`/`fsync` directly (no C module of ours): Foundation
/// cannot create a file 0600 from the start with `O_EXCL|O_NOFOLLOW`, nor fsync a folder.
package enum PrivateFiles {
    /// Creates `directory` and any missing parents with mode 0700.
    package static func createDirectory(_ directory: URL) throws(ChronicleError) {
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw .io(path: directory.path, reason: "cannot create the folder: \(error.localizedDescription)")
        }
    }

    /// Publishes `bytes` as a new file at `url`, atomically and durably, never replacing a file
    /// someone else published there first.
    ///
    /// The bytes go to a temporary 0600 file in the same folder (opened with `O_EXCL|O_NOFOLLOW`),
    /// which is fsynced and then hard-linked to `url`; the folder is fsynced after the link. A
    /// reader sees the whole file or none of it, and a crash never leaves a partial file at `url`.
    /// - Returns: `true` when this call created the file, `false` when one was already there.
    @discardableResult
    package static func publishNew(_ bytes: [UInt8], at url: URL) throws(ChronicleError) -> Bool {
        let directory = url.deletingLastPathComponent()
        try createDirectory(directory)
        let temporary = directory.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).tmp")
        try writeExclusive(bytes, to: temporary.path)
        defer { unlink(temporary.path) }
        guard link(temporary.path, url.path) == 0 else {
            let code = errno
            if code == EEXIST { return false }
            throw .io(path: url.path, reason: "cannot publish the file: \(String(cString: strerror(code)))")
        }
        syncDirectory(directory.path)
        return true
    }

    /// Writes `bytes` to `url` as a private (0600) file, replacing any file there atomically:
    /// a new temporary file in the same folder, fsynced, renamed over `url`, the folder fsynced.
    package static func replace(_ bytes: [UInt8], at url: URL) throws(ChronicleError) {
        let directory = url.deletingLastPathComponent()
        try createDirectory(directory)
        let temporary = directory.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).tmp")
        try writeExclusive(bytes, to: temporary.path)
        guard rename(temporary.path, url.path) == 0 else {
            let code = errno
            unlink(temporary.path)
            throw .io(path: url.path, reason: "cannot replace the file: \(String(cString: strerror(code)))")
        }
        syncDirectory(directory.path)
    }

    /// Writes a private (0600) file at `url` piece by piece, replacing any file there atomically
    /// when `body` returns: each piece `body` hands to `write` goes to a new temporary file in the
    /// same folder, which is fsynced and renamed over `url`; if `body` throws, it is deleted.
    /// - Returns: the number of bytes written.
    package static func replace(at url: URL, _ body: (_ write: ([UInt8]) throws -> Void) throws -> Void) throws -> Int {
        let directory = url.deletingLastPathComponent()
        try createDirectory(directory)
        let temporary = directory.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).tmp")
        let descriptor = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw ChronicleError.io(path: temporary.path, reason: "cannot create the file: \(String(cString: strerror(errno)))")
        }
        var total = 0
        do {
            defer { close(descriptor) }
            try body { bytes in
                var written = 0
                while written < bytes.count {
                    let result = bytes.withUnsafeBytes { buffer in write(descriptor, buffer.baseAddress.map { $0 + written }, bytes.count - written) }
                    if result < 0 {
                        if errno == EINTR { continue }
                        throw ChronicleError.io(path: url.path, reason: "cannot write the file: \(String(cString: strerror(errno)))")
                    }
                    written += result
                }
                total += written
            }
            guard fsync(descriptor) == 0 else {
                throw ChronicleError.io(path: url.path, reason: "cannot sync the file: \(String(cString: strerror(errno)))")
            }
        } catch {
            unlink(temporary.path)
            throw error
        }
        guard rename(temporary.path, url.path) == 0 else {
            let code = errno
            unlink(temporary.path)
            throw ChronicleError.io(path: url.path, reason: "cannot replace the file: \(String(cString: strerror(code)))")
        }
        syncDirectory(directory.path)
        return total
    }

    /// Writes `bytes` to a new 0600 file at `path` and fsyncs it; fails if anything exists there.
    private static func writeExclusive(_ bytes: [UInt8], to path: String) throws(ChronicleError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw .io(path: path, reason: "cannot create the file: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var written = 0
        while written < bytes.count {
            let result = bytes.withUnsafeBytes { buffer in
                write(descriptor, buffer.baseAddress.map { $0 + written }, bytes.count - written)
            }
            if result < 0 {
                if errno == EINTR { continue }
                throw .io(path: path, reason: "cannot write the file: \(String(cString: strerror(errno)))")
            }
            written += result
        }
        guard fsync(descriptor) == 0 else { throw .io(path: path, reason: "cannot sync the file: \(String(cString: strerror(errno)))") }
    }

    /// Flushes a folder's entries (a new or renamed file) to disk; best effort.
    package static func syncDirectory(_ path: String) {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }
}
