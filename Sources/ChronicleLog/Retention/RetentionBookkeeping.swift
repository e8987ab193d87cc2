import ChronicleFormat
import Dispatch
import Synchronization

/// What the log knows about retention between transactions: the store's default, the automatic
/// compaction's schedule and passes, and the keys' rules as last read or written. A write
/// consults it once per transaction (``RetentionRules`` taken at the first change that declares a
/// rule, the schedule told of the transaction's records once it committed), never once per change.
final class RetentionBookkeeping: Sendable {
    /// The retention of a key that declared none (from the configuration of the first store opened on the directory).
    let defaultRetention: Retention
    /// When the automatic compaction runs next, and over which keys.
    let schedule = Mutex(SweepSchedule(everyKey: true))
    /// The passes of the automatic compaction in progress (a closing log waits for them).
    let passes = DispatchGroup()
    /// The `retention` rows as last read or written; a write transaction takes them and puts them back.
    let rules = Mutex(RetentionRules())
    /// History links the automatic compaction's passes read to count keys' records (a count of
    /// work, for tests and benchmarks).
    let linksWalked = Atomic<Int>(0)

    init(defaultRetention: Retention) { self.defaultRetention = defaultRetention }
}

/// The `retention` rows a writer has read or written, so that a write learns a key's rule
/// without a lookup per change. They hold while `meta`'s `retention.rules` token is the one they
/// were read under: every change of a row writes a new random token in the same transaction
/// (docs/FORMAT.md sections 2 and 5.4), so a row another process changed, or a transaction that did not commit,
/// empties them at the next write transaction's first look (one read of `meta` a transaction).
struct RetentionRules: Sendable {
    /// Rows remembered at most; past it, the next one starts over (a lookup each, as before).
    static let maxRows = 4096

    /// The token the rows were read under (empty: no token written yet).
    private(set) var token: [UInt8] = []
    /// A key's row by history prefix (``HistoryKey``); `.some(nil)`: no row.
    private var rows: [HashedPrefix: UInt32?] = [:]

    /// Empties the rows unless `current` is the token they were read under.
    mutating func check(against current: [UInt8]) {
        guard current != token else { return }
        self = RetentionRules()
        token = current
    }

    /// The row of the key with history prefix `prefix`, when known: `.some(nil)` for no row.
    func row(_ prefix: [UInt8]) -> UInt32?? { rows[HashedPrefix(prefix)] }

    /// Remembers a row read (`nil`: none).
    mutating func remember(_ prefix: [UInt8], _ row: UInt32?) {
        if rows.count >= Self.maxRows { rows = [:] }
        rows[HashedPrefix(prefix)] = .some(row)
    }

    /// A row this transaction changed, and the new token it wrote with it.
    mutating func changed(_ prefix: [UInt8], to row: UInt32?, token: [UInt8]) {
        self.token = token
        remember(prefix, row)
    }

    /// Takes the rows out (a write transaction holds them; `self` is empty until they are put back).
    mutating func take() -> RetentionRules {
        let taken = self
        self = RetentionRules()
        return taken
    }
}

/// A history prefix (``HistoryKey``) as a dictionary key, hashed in one call over its bytes (an
/// array of bytes hashes byte by byte, which costs more than the LMDB lookup a remembered row saves).
struct HashedPrefix: Hashable, Sendable {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }
}
