/// How commits reach the disk. Chosen per store; the first `Store` opened on a
/// directory in a process sets it for every other one on that directory.
///
/// The one name of the concept: the store's configuration takes it, the log maps it once onto
/// LMDB's flags (`MDB_NOMETASYNC`, `MDB_NOSYNC`).
public enum Durability: Sendable, Hashable {
    /// Every commit is fsynced before `set`/`write` returns: an acknowledged
    /// change survives a crash of the process, of the OS, and a power loss.
    case durable
    /// Data pages are fsynced, the meta page is not (`MDB_NOMETASYNC`). A crash
    /// of the process loses nothing; a power loss can roll back the last
    /// commit (the store stays consistent).
    case noMetaSync
    /// Nothing is fsynced at commit (`MDB_NOSYNC`); a background flush runs
    /// every `flushInterval`. A crash of the process loses nothing; a power
    /// loss can lose every change since the last flush, and on file systems
    /// that reorder writes can damage the store.
    case noSync(flushInterval: Duration)
}
