internal import CChronicleLMDB
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// An error returned by liblmdb, with its code and the library's own message.
///
/// Every LMDB return code in this module goes through ``check(_:)``, so this
/// is the one place that maps C return codes to Swift errors.
package struct LMDBError: Error, Equatable, Hashable, Sendable, CustomStringConvertible {
    /// The raw return code (an `MDB_*` constant or an `errno` value).
    package let code: Int32
    /// What this wrapper found, when it says more than the code.
    package let detail: String?

    /// Creates an error from a raw LMDB or `errno` code.
    package init(code: Int32, detail: String? = nil) {
        self.code = code
        self.detail = detail
    }

    /// The message `mdb_strerror` gives for ``code`` (after the errno name, for system
    /// errors), and the detail if any.
    package var message: String {
        var text = mdb_strerror(code).map { String(cString: $0) } ?? "LMDB error \(code)"
        if let errnoName { text = "\(errnoName): \(text)" }
        return detail.map { "\(text): \($0)" } ?? text
    }

    /// The symbolic name of ``code`` when it is an operating-system error (`ENOSPC`, `EIO`, …), else `nil`.
    package var errnoName: String? {
        Self.errnoNames[code]
    }

    private static let errnoNames: [Int32: String] = [
        EPERM: "EPERM", ENOENT: "ENOENT", EIO: "EIO", EBADF: "EBADF", EAGAIN: "EAGAIN", ENOMEM: "ENOMEM",
        EACCES: "EACCES", EBUSY: "EBUSY", EEXIST: "EEXIST", EINVAL: "EINVAL", ENFILE: "ENFILE", EMFILE: "EMFILE",
        EFBIG: "EFBIG", ENOSPC: "ENOSPC", EROFS: "EROFS", ENOLCK: "ENOLCK", EDQUOT: "EDQUOT", EINTR: "EINTR", EDEADLK: "EDEADLK",
    ]

    package static func == (lhs: LMDBError, rhs: LMDBError) -> Bool { lhs.code == rhs.code }
    package func hash(into hasher: inout Hasher) { hasher.combine(code) }

    package var description: String { "\(message) (code \(code))" }

    /// The key or data item was not found.
    package static let notFound = LMDBError(code: MDB_NOTFOUND)
    /// A key/data pair already exists (with `noOverwrite` or `append`).
    package static let keyExists = LMDBError(code: MDB_KEYEXIST)
    /// The environment's map is full; the environment grows and retries.
    package static let mapFull = LMDBError(code: MDB_MAP_FULL)
    /// Another process grew the map; this process adopts the size and retries.
    package static let mapResized = LMDBError(code: MDB_MAP_RESIZED)
    /// Every reader slot is taken.
    package static let readersFull = LMDBError(code: MDB_READERS_FULL)
    /// The environment is too old or too new for this library.
    package static let versionMismatch = LMDBError(code: MDB_VERSION_MISMATCH)
    /// The file is not an LMDB file.
    package static let invalid = LMDBError(code: MDB_INVALID)
    /// A page or database is corrupted.
    package static let corrupted = LMDBError(code: MDB_CORRUPTED)
    /// A key or value has an invalid size (for example a key over 511 bytes).
    package static let badValueSize = LMDBError(code: MDB_BAD_VALSIZE)
    /// No space left on the device.
    package static let noSpace = LMDBError(code: ENOSPC)
    /// An input/output error of the device (LMDB may report a full disk this way too).
    package static let ioError = LMDBError(code: EIO)
    /// The environment has too many named databases.
    package static let databasesFull = LMDBError(code: MDB_DBS_FULL)
}

/// Maps an LMDB return code to a thrown ``LMDBError``.
@inline(__always)
func check(_ rc: Int32) throws(LMDBError) {
    if rc != 0 { throw LMDBError(code: rc) }
}
