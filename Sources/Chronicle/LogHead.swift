import LMDB

/// The names of the environment's databases and of the `meta` entries.
struct Databases: Sendable {
    let meta: Database
    let events: Database
    let dots: Database
    let history: Database
    let defaults: Database
    let secrets: Database
    let peers: Database
    /// Events stamped beyond the clock-drift guard, waiting for local time: `HLC ‖ sequence` → empty.
    let deferred: Database

    init(environment: Environment) throws {
        meta = try environment.openDatabase(named: "meta")
        events = try environment.openDatabase(named: "events")
        dots = try environment.openDatabase(named: "dots")
        history = try environment.openDatabase(named: "history")
        defaults = try environment.openDatabase(named: "defaults")
        secrets = try environment.openDatabase(named: "secrets")
        peers = try environment.openDatabase(named: "peers")
        deferred = try environment.openDatabase(named: "deferred")
    }

    func view(_ domain: Domain) -> Database {
        domain == .defaults ? defaults : secrets
    }
}

/// Names of the entries in the `meta` database.
enum MetaKey {
    static let format = Array("format".utf8)
    static let replica = Array("replica".utf8)
    static let epoch = Array("epoch".utf8)
    static let home = Array("home".utf8)
    static let sequence = Array("seq".utf8)
    static let counter = Array("counter".utf8)
    static let hlc = Array("hlc".utf8)
    static let chain = Array("chain".utf8)
    /// The id of the data key whose chain subkey keys the hash chain (absent: unkeyed chain).
    static let chainKey = Array("chain.key".utf8)
    /// The id of the data key that seals new events.
    static let activeKey = Array("dk.active".utf8)
    /// Wrapped data keys: `dk/` ‖ key id.
    static let wrappedKeyPrefix = Array("dk/".utf8)
    static func wrappedKey(_ id: KeyID) -> [UInt8] { wrappedKeyPrefix + id.bytes }
}

/// The tip of the local log, read from `meta` inside every write transaction
/// (two processes may share the store, so it is never cached across transactions).
struct LogHead: Sendable, Equatable {
    /// The last local sequence number.
    var sequence: UInt64
    /// The last counter used by this replica's own events.
    var counter: UInt64
    /// The last HLC reading.
    var hlc: HLC
    /// The chain hash of the last record.
    var chain: [UInt8]
    /// The data key whose subkey keys the chain, or `nil` for an unkeyed chain.
    var chainKeyID: KeyID?

    static let empty = LogHead(sequence: 0, counter: 0, hlc: HLC(rawValue: 0), chain: [UInt8](repeating: 0, count: LogRecord.hashLength), chainKeyID: nil)

    static func read(_ txn: borrowing Transaction, _ dbs: Databases) throws -> LogHead {
        func u64(_ key: [UInt8]) throws -> UInt64 {
            guard let bytes = try txn.get(dbs.meta, key: key) else { return 0 }
            guard let value = UInt64(bigEndianBytes: bytes) else {
                throw ChronicleError.corruptRecord(sequence: 0, reason: "meta entry \(String(decoding: key, as: UTF8.self)) is malformed")
            }
            return value
        }
        let chain = try txn.get(dbs.meta, key: MetaKey.chain) ?? LogHead.empty.chain
        let chainKeyID = try txn.get(dbs.meta, key: MetaKey.chainKey).map { KeyID(bytes: $0) }
        return LogHead(
            sequence: try u64(MetaKey.sequence), counter: try u64(MetaKey.counter), hlc: HLC(rawValue: try u64(MetaKey.hlc)),
            chain: chain, chainKeyID: chainKeyID)
    }

    func write(_ txn: borrowing Transaction, _ dbs: Databases) throws {
        try txn.put(dbs.meta, key: MetaKey.sequence, value: sequence.bigEndianBytes)
        try txn.put(dbs.meta, key: MetaKey.counter, value: counter.bigEndianBytes)
        try txn.put(dbs.meta, key: MetaKey.hlc, value: hlc.rawValue.bigEndianBytes)
        try txn.put(dbs.meta, key: MetaKey.chain, value: chain)
    }
}

/// Keys of the `history` index: `domain ‖ name length ‖ name ‖ sequence (u64 BE)`.
enum HistoryKey {
    static func prefix(domain: Domain, name: String) -> [UInt8] {
        let nameBytes = Array(name.utf8)
        return [domain.rawValue, UInt8(nameBytes.count)] + nameBytes
    }

    static func make(domain: Domain, name: String, sequence: UInt64) -> [UInt8] {
        prefix(domain: domain, name: name) + sequence.bigEndianBytes
    }
}
