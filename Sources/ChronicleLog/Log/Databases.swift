package import ChronicleFormat
package import ChronicleLMDB

/// The names of the environment's databases and of the `meta` entries.
package struct Databases: Sendable {
    package let meta: Database
    package let events: Database
    package let dots: Database
    /// A key's latest record: `domain ‖ name length ‖ name` → sequence u64 (see ``HistoryKey``).
    package let latest: Database
    /// The record of the same key before each record: sequence u64 → sequence u64 (none for a key's first).
    package let previous: Database
    /// The history index of builds before `latest`/`previous` (`domain ‖ name length ‖ name ‖ sequence`):
    /// empty in a store this build indexed; rows here are events an earlier build wrote, indexed at the next open.
    package let legacyHistory: Database
    package let defaults: Database
    package let secrets: Database
    package let peers: Database
    /// Events stamped beyond the clock-drift guard, waiting for local time: `HLC ‖ sequence` → empty.
    package let deferred: Database
    /// Items peers sent that failed authentication or validation: `u64 id` → ``QuarantineRecord``.
    package let quarantine: Database
    /// The retention a key declared when this store last wrote it: `domain ‖ name length ‖ name` → u32
    /// revisions kept (0: all). A key without a row keeps the store's default (``LogOptions/retention``).
    package let retention: Database

    package init(environment: Environment) throws {
        meta = try environment.openDatabase(named: "meta")
        events = try environment.openDatabase(named: "events")
        dots = try environment.openDatabase(named: "dots")
        latest = try environment.openDatabase(named: "latest")
        previous = try environment.openDatabase(named: "previous")
        legacyHistory = try environment.openDatabase(named: "history")
        defaults = try environment.openDatabase(named: "defaults")
        secrets = try environment.openDatabase(named: "secrets")
        peers = try environment.openDatabase(named: "peers")
        deferred = try environment.openDatabase(named: "deferred")
        quarantine = try environment.openDatabase(named: "quarantine")
        retention = try environment.openDatabase(named: "retention")
    }

    /// Every database of the environment.
    package var all: [Database] {
        [meta, events, dots, latest, previous, legacyHistory, defaults, secrets, peers, deferred, quarantine, retention]
    }

    package func view(_ domain: Domain) -> Database {
        domain == .defaults ? defaults : secrets
    }
}
