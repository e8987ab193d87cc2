import ChronicleFormat
public import Foundation
import ChronicleSodium
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads files that hold secrets (key files, passphrase files, bearer tokens) only when
/// nobody else could have read or replaced them.
///
/// A secret file must be a regular file (not a symbolic link), owned by the user running
/// the process, readable by nobody else (no group or other permission bits: `chmod 600`),
/// in a folder that only its owner (or root) can write to.
@_spi(Tools) public enum SecretFile {
    /// The bytes of the secret file at `url`.
    /// - Parameters:
    ///   - url: the file.
    ///   - what: what the file holds, for errors ("key file", "token file").
    /// - Throws: ``ChronicleError/invalidArgument(_:)`` naming what is wrong and how to fix it;
    ///   ``ChronicleError/keyUnavailable(reason:)`` when the file cannot be read.
    public static func contents(of url: URL, what: String) throws(ChronicleError) -> [UInt8] {
        let path = url.path
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            if code == ELOOP { throw .invalidArgument("the \(what) \(path) is a symbolic link; give the file itself") }
            throw .keyUnavailable(reason: "cannot read the \(what) \(path): \(String(cString: strerror(code)))")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
            throw .invalidArgument("the \(what) \(path) is not a regular file")
        }
        try checkPrivate(status, path: path, what: what)
        try checkFolder(url.deletingLastPathComponent().path, of: path, what: what)
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        defer { Sodium.wipe(&buffer) }
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .keyUnavailable(reason: "cannot read the \(what) \(path): \(String(cString: strerror(errno)))")
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: buffer[0..<count])
            guard bytes.count <= 1 << 20 else { throw .invalidArgument("the \(what) \(path) is over 1 MiB; it is not a \(what)") }
        }
    }

    /// Throws unless `status` is owned by this user and has no group or other permission bits.
    static func checkPrivate(_ status: stat, path: String, what: String) throws(ChronicleError) {
        guard status.st_uid == geteuid() else {
            throw .invalidArgument("the \(what) \(path) belongs to user \(status.st_uid), not to this user (\(geteuid())); a secret must be your own file")
        }
        let mode = status.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw .invalidArgument(
                "the \(what) \(path) can be read by others (mode \(String(mode, radix: 8))); run `chmod 600 \(path)` (and replace the secret if others may have read it)")
        }
    }

    /// Throws when the folder holding a secret file can be written by someone else (who could replace it).
    private static func checkFolder(_ folder: String, of path: String, what: String) throws(ChronicleError) {
        var status = stat()
        guard stat(folder, &status) == 0 else { return }
        let writableByOthers = status.st_mode & 0o022 != 0 && status.st_mode & S_ISVTX == 0
        guard !writableByOthers, status.st_uid == geteuid() || status.st_uid == 0 else {
            throw .invalidArgument("the folder of the \(what) \(path) can be written by others; keep secrets in a folder only you can change")
        }
    }
}
