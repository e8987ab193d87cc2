@_spi(Wire) public import ChronicleFormat
public import Foundation
public import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// The hub's state in PostgreSQL: tenants, device tokens (hashed), each tenant's log of event
/// items as received, and the wrapped keys devices pushed. Hub processes hold nothing else, so
/// any number of them serve the same tenants.
///
/// Schema (`migrate()`; docs/FORMAT.md, section 13):
///
/// ```
/// tenants(id, name UNIQUE, relay_id 16 B, epoch 16 B, head, chain 32 B, event_count, byte_count,
///         max_events, max_bytes)
/// devices(tenant_id, name, token_hash 32 B UNIQUE, created, last_seen, pushed, pulled)
/// events(tenant_id, position, writer 16 B, counter, policy (-1 newer format), payload_size, body, chain,
///        key (domain ‖ length ‖ name), hlc, device, also_pushed_by, PRIMARY KEY (tenant_id, position),
///        UNIQUE (tenant_id, writer, counter, sha256(body)))
/// wrapped_keys(tenant_id, digest 32 B, body, key_id 16 B, device, arrival)
/// tenants.retain_revisions: revisions of a key each device's pushes keep (NULL: 100, 0: all);
/// tenants.appended_since_trim: events appended since a node last started a trim of the tenant
/// ```
///
/// Positions are a tenant's own sequence, numbered inside the appending transaction while it
/// holds the tenant's row lock: appends of one tenant are serialized and commit in position
/// order, so a puller at position N never misses an event that commits later below N.
public final class HubDatabase: Sendable {
    /// The pooled client (run by ``run()``).
    let client: PostgresClient
    let configuration: PostgresClient.Configuration
    /// Where the URL points, for a direct connection and for messages.
    let target: Target
    let logger: Logger

    /// Items one pull scans at most (the filters may pass over many).
    static let scanLimit = 4_096
    /// About how many bytes of events one pull returns at most.
    static let pullBytes = 1 << 20
    /// The longest the statement answering a request for events by identity may run (PostgreSQL's
    /// `statement_timeout`, set for that transaction only): past it the request gets 503.
    static let eventRequestTimeoutMilliseconds = 5_000
    /// The most bodies of one identity an answer to a request by identity carries (each pushing
    /// device's smallest first; docs/FORMAT.md 7.6): a member needs the genuine one, which the
    /// device that wrote it pushed.
    static let versionsPerIdentity = 8
    /// The channel the hub's nodes notify on: the payload is the tenant id.
    static let channel = "chronicle_hub"
    /// The most tokens a node remembers (``device(token:)``).
    static let maxRememberedTokens = 100_000
    /// Tokens this node has served, by digest.
    let tokens = Mutex<[[UInt8]: HubDevice]>([:])
    /// The most wrapped keys a tenant holds.
    static let maxKeys: Int64 = 1_024
    /// The most wrapped keys one device's pushes store (a device has a key or two, and one more
    /// per rotation): no token can fill its tenant's table. `chronicle hub keys drop` frees them.
    static let maxKeysPerDevice: Int64 = 64
    /// Appends waiting on this node, per tenant: they serialize on the tenant's row lock anyway,
    /// so they wait here rather than each holding one of the pool's connections (one tenant's
    /// queue would otherwise take every connection and stall every other tenant on the node),
    /// and whoever's turn it is commits the waiting ones with its own.
    let appendQueue = AppendQueue()
    /// The tenants this node is trimming.
    let trims = Mutex<Set<Int64>>([])

    /// A database at a PostgreSQL URL: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require]`.
    ///
    /// - Throws: ``ChronicleError/invalidArgument(_:)`` when the URL is not one.
    public init(url: String, logger: Logger = Logger(label: "chronicle.hub")) throws(ChronicleError) {
        target = try Target(url: url)
        configuration = target.clientConfiguration
        // The pool logs why it cannot connect (login refused, no TLS, too many connections) here:
        // the cause an operator needs when requests start failing with 503.
        client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.logger = logger
    }

    /// Runs the connection pool until the task is cancelled; every other call needs it running.
    public func run() async {
        running.withLock { $0 = true }
        await withTaskCancellationHandler {
            await client.run()
        } onCancel: {
            stopping.withLock { $0 = true }
        }
    }

    /// Whether ``run()`` was called (the pool marks itself running as the call begins).
    private let running = Mutex(false)
    /// Whether ``run()`` was cancelled: the pool is closing its connections.
    private let stopping = Mutex(false)

    /// Whether the pool is shutting down (a connection it closes is not a lost database).
    var isStopping: Bool { stopping.withLock { $0 } }

    /// Says the pool is about to stop, before its task is cancelled: the tasks beside it then
    /// take the connections it closes for the shutdown they are.
    func willStop() {
        stopping.withLock { $0 = true }
    }

    /// Returns once ``run()`` has begun. Call it before the first query of a task started beside
    /// ``run()``: the pool answers a lease asked for before it runs, but with a warning in the log.
    public func untilRunning() async {
        while !running.withLock({ $0 }) && !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
        // `run()` marks the pool running before its first suspension: a moment after the flag.
        try? await Task.sleep(for: .milliseconds(10))
    }

    /// A PostgreSQL URL taken apart.
    struct Target: Sendable {
        enum Mode: Sendable { case disable, prefer, require }
        var host: String
        var port: Int
        var user: String
        var password: String?
        var database: String?
        var mode: Mode

        init(url text: String) throws(ChronicleError) {
            guard let url = URLComponents(string: text), ["postgres", "postgresql"].contains(url.scheme ?? ""),
                let host = url.host, !host.isEmpty, let user = url.user, !user.isEmpty
            else {
                throw .invalidArgument("the database must be a URL like postgres://USER:PASSWORD@HOST:5432/DATABASE")
            }
            let database = url.path.hasPrefix("/") ? String(url.path.dropFirst()) : url.path
            switch url.queryItems?.first(where: { $0.name == "sslmode" })?.value ?? "prefer" {
            case "disable": mode = .disable
            case "prefer", "allow": mode = .prefer
            case "require", "verify-full", "verify-ca": mode = .require
            default: throw .invalidArgument("sslmode is disable, prefer or require")
            }
            (self.host, port, self.user, password) = (host, url.port ?? 5432, user, url.password)
            self.database = database.isEmpty ? nil : database
        }

        var clientConfiguration: PostgresClient.Configuration {
            let tls: PostgresClient.Configuration.TLS = switch mode {
            case .disable: .disable
            case .prefer: .prefer(.makeClientConfiguration())
            case .require: .require(.makeClientConfiguration())
            }
            var configuration = PostgresClient.Configuration(host: host, port: port, username: user, password: password, database: database, tls: tls)
            configuration.options.maximumConnections = 40
            return configuration
        }

        func connectionTLS() throws -> PostgresConnection.Configuration.TLS {
            switch mode {
            case .disable: .disable
            case .prefer: .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
            case .require: .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            }
        }
    }

    /// Runs `body` in a transaction; what `body` throws comes out as itself (a refusal stays a
    /// refusal), not wrapped in the driver's transaction error.
    func transaction<Result: Sendable>(_ body: (PostgresConnection) async throws -> Result) async throws -> Result {
        do {
            return try await client.withTransaction(logger: logger) { connection in try await body(connection) }
        } catch let error as PostgresTransactionError {
            // A failed COMMIT is a database failure like any other (503, retry), not a 500.
            if let inner = error.closureError ?? error.beginError ?? error.commitError { throw inner }
            throw error
        }
    }

    // MARK: - Schema

    /// The schema's versions, oldest first: each is applied once, in order, and recorded in
    /// `schema_migrations` with when it was applied (docs/FORMAT.md, section 13).
    public static let migrations: [HubMigration] = [
        HubMigration(
            version: 1, name: "tenants, devices, events and wrapped keys",
            statements: [
                """
                CREATE TABLE IF NOT EXISTS tenants (
                    id bigserial PRIMARY KEY,
                    name text NOT NULL UNIQUE,
                    relay_id bytea NOT NULL,
                    epoch bytea NOT NULL,
                    head bigint NOT NULL DEFAULT 0,
                    chain bytea NOT NULL,
                    event_count bigint NOT NULL DEFAULT 0,
                    byte_count bigint NOT NULL DEFAULT 0,
                    max_events bigint,
                    max_bytes bigint,
                    created timestamptz NOT NULL DEFAULT now())
                """,
                """
                CREATE TABLE IF NOT EXISTS devices (
                    tenant_id bigint NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                    name text NOT NULL,
                    token_hash bytea NOT NULL UNIQUE,
                    created timestamptz NOT NULL DEFAULT now(),
                    last_seen timestamptz,
                    pushed bigint NOT NULL DEFAULT 0,
                    pulled bigint NOT NULL DEFAULT 0,
                    PRIMARY KEY (tenant_id, name))
                """,
                """
                CREATE TABLE IF NOT EXISTS events (
                    tenant_id bigint NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                    position bigint NOT NULL,
                    writer bytea NOT NULL,
                    counter bigint NOT NULL,
                    policy smallint NOT NULL,
                    payload_size integer NOT NULL,
                    body bytea NOT NULL,
                    chain bytea NOT NULL,
                    PRIMARY KEY (tenant_id, position))
                """,
                """
                CREATE TABLE IF NOT EXISTS wrapped_keys (
                    tenant_id bigint NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                    digest bytea NOT NULL,
                    body bytea NOT NULL,
                    PRIMARY KEY (tenant_id, digest))
                """,
            ]),
        // One row per distinct body of an identity: a body pushed first by a device without the
        // key must not swallow the genuine one (members pick; FORMAT.md 7.2).
        HubMigration(
            version: 2, name: "one row per distinct body of an identity",
            statements: [
                "ALTER TABLE events DROP CONSTRAINT IF EXISTS events_tenant_id_writer_counter_key",
                "CREATE UNIQUE INDEX IF NOT EXISTS events_identity_body ON events (tenant_id, writer, counter, sha256(body))",
            ]),
        // Which key a record wraps (a pull carries only the keys its events name) and which device
        // pushed it (each device stores a bounded number).
        HubMigration(
            version: 3, name: "wrapped keys by key id and pushing device",
            statements: [
                "ALTER TABLE wrapped_keys ADD COLUMN IF NOT EXISTS key_id bytea",
                "ALTER TABLE wrapped_keys ADD COLUMN IF NOT EXISTS device text",
                "UPDATE wrapped_keys SET key_id = substring(body from 2 for 16) WHERE key_id IS NULL",
                "CREATE INDEX IF NOT EXISTS wrapped_keys_key_id ON wrapped_keys (tenant_id, key_id)",
            ]),
        // What retention needs of each event (its key, its clock, the device that pushed it), and
        // each tenant's retention (FORMAT.md 13): a tenant's log keeps live values, not every write.
        HubMigration(
            version: 4, name: "retention: events by key and pushing device",
            statements: [
                "ALTER TABLE events ADD COLUMN IF NOT EXISTS key bytea",
                "ALTER TABLE events ADD COLUMN IF NOT EXISTS hlc bigint",
                "ALTER TABLE events ADD COLUMN IF NOT EXISTS device text",
                "ALTER TABLE events ADD COLUMN IF NOT EXISTS also_pushed_by text[] NOT NULL DEFAULT '{}'",
                "ALTER TABLE tenants ADD COLUMN IF NOT EXISTS retain_revisions integer",
                "ALTER TABLE tenants ADD COLUMN IF NOT EXISTS appended_since_trim bigint NOT NULL DEFAULT 0",
                "CREATE INDEX IF NOT EXISTS events_retention ON events (tenant_id, key, device, position) WHERE key IS NOT NULL",
            ]),
        // The order key records arrived in: a pull sends each id's records oldest first, so the
        // record pushed with the events that first named an id comes before what a token holder
        // who read the id from that push stored under it since (FORMAT.md 13).
        HubMigration(
            version: 5, name: "wrapped keys in arrival order",
            statements: [
                "ALTER TABLE wrapped_keys ADD COLUMN IF NOT EXISTS arrival bigserial",
                "CREATE INDEX IF NOT EXISTS wrapped_keys_arrival ON wrapped_keys (tenant_id, key_id, arrival)",
            ]),
    ]

    /// Applies the migrations the database has not recorded, in order, each in the same
    /// transaction as its record (concurrent runs wait for each other).
    ///
    /// The statements of every version are idempotent, so a database the hub created before it
    /// recorded versions is brought up to date and recorded without change.
    /// - Returns: the versions applied now (empty: the schema was up to date).
    @discardableResult
    public func migrate() async throws -> [HubMigration] {
        try await transaction { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(7411011)", logger: logger)
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version integer PRIMARY KEY,
                    name text NOT NULL,
                    applied timestamptz NOT NULL DEFAULT now())
                """, logger: logger)
            var recorded = Set<Int>()
            for try await version in try await connection.query("SELECT version FROM schema_migrations", logger: logger).decode(Int.self) {
                recorded.insert(version)
            }
            if let newest = recorded.max(), newest > Self.migrations.count {
                throw HubDatabaseUnavailable(
                    reason: "the hub's database has schema version \(newest), newer than this chronicle knows (\(Self.migrations.count)): upgrade chronicle")
            }
            var applied: [HubMigration] = []
            for migration in Self.migrations where !recorded.contains(migration.version) {
                for statement in migration.statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query(
                    "INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))", logger: logger)
                applied.append(migration)
            }
            return applied
        }
    }

    /// Every known migration with when it was applied (`nil`: pending), and the versions the
    /// database records that this build does not know (a newer chronicle migrated it).
    public func migrationStatus() async throws -> (migrations: [(migration: HubMigration, applied: Date?)], unknown: [Int]) {
        var applied: [Int: Date] = [:]
        let exists = try await client.query("SELECT to_regclass('schema_migrations') IS NOT NULL", logger: logger)
        var hasTable = false
        for try await value in exists.decode(Bool.self) { hasTable = value }
        if hasTable {
            let rows = try await client.query("SELECT version, applied FROM schema_migrations ORDER BY version", logger: logger)
            for try await (version, date) in rows.decode((Int, Date).self) { applied[version] = date }
        }
        let known = Set(Self.migrations.map(\.version))
        return (Self.migrations.map { ($0, applied[$0.version]) }, applied.keys.filter { !known.contains($0) }.sorted())
    }
}

/// A device authenticated by its token.
struct HubDevice: Sendable, Equatable {
    var tenant: Int64
    var name: String
    /// The digest of the token it presented (what `devices.token_hash` holds).
    var tokenHash: [UInt8]
}

/// An event identity as a set member.
struct IdentityKey: Hashable {
    var writer: [UInt8]
    var counter: Int64
}

/// One version of the hub's schema.
public struct HubMigration: Sendable {
    /// The version: 1, 2, 3, … in the order they apply.
    public let version: Int
    /// What it changes, for `chronicle hub migrate --status`.
    public let name: String
    /// Its SQL statements (each idempotent).
    public let statements: [String]
}
