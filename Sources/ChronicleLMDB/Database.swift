internal import CChronicleLMDB

/// A named database inside an ``Environment``.
///
/// Open one with ``Environment/openDatabase(named:)``; the handle stays valid
/// for the environment's lifetime and may be shared between threads.
package struct Database: Sendable, Hashable {
    let dbi: MDB_dbi
    /// The database's name.
    package let name: String

    init(dbi: MDB_dbi, name: String) {
        self.dbi = dbi
        self.name = name
    }
}

/// Flags for ``Transaction/put(_:key:value:flags:)``.
package struct PutFlags: OptionSet, Sendable {
    package let rawValue: UInt32
    package init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Fail with ``LMDBError/keyExists`` if the key is present.
    package static let noOverwrite = PutFlags(rawValue: UInt32(MDB_NOOVERWRITE))
    /// Append at the end of the database; keys must arrive in increasing order.
    package static let append = PutFlags(rawValue: UInt32(MDB_APPEND))
}
