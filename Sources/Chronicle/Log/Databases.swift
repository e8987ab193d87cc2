import ChronicleFormat
import ChronicleLMDB

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
    /// Items peers sent that failed authentication or validation: `u64 id` → ``QuarantineRecord``.
    let quarantine: Database

    init(environment: Environment) throws {
        meta = try environment.openDatabase(named: "meta")
        events = try environment.openDatabase(named: "events")
        dots = try environment.openDatabase(named: "dots")
        history = try environment.openDatabase(named: "history")
        defaults = try environment.openDatabase(named: "defaults")
        secrets = try environment.openDatabase(named: "secrets")
        peers = try environment.openDatabase(named: "peers")
        deferred = try environment.openDatabase(named: "deferred")
        quarantine = try environment.openDatabase(named: "quarantine")
    }

    func view(_ domain: Domain) -> Database {
        domain == .defaults ? defaults : secrets
    }
}
