public import Foundation
import PostgresNIO

// The hub's schema: its versions, how they are applied, and which nodes may serve a database.
//
// Policy (docs/HUB.md, "Upgrades"): a version records the oldest version whose nodes still run
// beside it (`schema_migrations.oldest_node`). An expanding version (a table, a column with a
// default, an index) names the version before it, so the previous nodes keep serving while the
// new ones roll out; a version that takes something away (a column, a table the previous nodes
// read) comes one release after the nodes stopped using it, and names itself. A node serves a
// database whose unknown versions all name a version it knows, and refuses any other.

extension HubDatabase {
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
        // Trims read what changed (FORMAT.md 13): appends mark their keys in `trim_pending`, and a
        // tenant stored before is swept once (every existing row reads `sweep_from` as '', new
        // tenants NULL). Dead rows of `events` are vacuumed after 1% of the table, not 20%; the
        // index on (tenant_id, key_id) was a prefix of `wrapped_keys_arrival`. Nodes of version 5
        // would run beside it (they trim whole tenants), but they refuse any newer version:
        // `oldest_node` starts here.
        HubMigration(
            version: 6, name: "trims read what changed since the last", oldestNode: 5,
            statements: [
                // What touches `events` and `wrapped_keys` first: should it wait (for a VACUUM
                // of `events`, say), nothing of `tenants` is locked meanwhile.
                "ALTER TABLE events SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02)",
                "DROP INDEX IF EXISTS wrapped_keys_key_id",
                "CREATE SEQUENCE IF NOT EXISTS trim_marks",
                """
                CREATE TABLE IF NOT EXISTS trim_pending (
                    tenant_id bigint NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                    key bytea NOT NULL,
                    marks bigint NOT NULL DEFAULT nextval('trim_marks'),
                    PRIMARY KEY (tenant_id, key))
                """,
                "ALTER TABLE trim_pending SET (autovacuum_vacuum_scale_factor = 0.05)",
                "ALTER TABLE tenants ADD COLUMN IF NOT EXISTS sweep_from bytea DEFAULT ''::bytea",
                "ALTER TABLE tenants ALTER COLUMN sweep_from SET DEFAULT NULL",
            ]),
        // Push marks (FORMAT.md 13): how far the tenant holds what each device pushed of each of
        // its logs, so after a restore a device pushes again only what the hub lacks. Expanding:
        // nodes of version 6 run beside it (a device pushing through one moves no mark, and its
        // next sync through a newer node pushes again from its mark: duplicates, never a loss).
        HubMigration(
            version: 7, name: "push marks", oldestNode: 6,
            statements: [
                "CREATE SEQUENCE IF NOT EXISTS push_mark_moves",
                """
                CREATE TABLE IF NOT EXISTS push_marks (
                    tenant_id bigint NOT NULL,
                    device text NOT NULL,
                    source bytea NOT NULL,
                    epoch bytea NOT NULL,
                    filter text NOT NULL,
                    up_to bigint NOT NULL,
                    up_to_chain bytea,
                    pushed_after bigint NOT NULL,
                    pushed_up_to bigint NOT NULL,
                    pushed_chain bytea NOT NULL,
                    moved bigint NOT NULL DEFAULT nextval('push_mark_moves'),
                    PRIMARY KEY (tenant_id, device, source, epoch, filter),
                    FOREIGN KEY (tenant_id, device) REFERENCES devices (tenant_id, name) ON DELETE CASCADE)
                """,
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
            // A version that waits this long for a table (a long VACUUM, an old node's statement)
            // fails, and the operator runs `migrate` again, rather than stalling every request
            // behind the lock it waits for.
            try await connection.query("SET LOCAL lock_timeout = '10s'", logger: logger)
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version integer PRIMARY KEY,
                    name text NOT NULL,
                    applied timestamptz NOT NULL DEFAULT now())
                """, logger: logger)
            try await connection.query("ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS oldest_node integer", logger: logger)
            var recorded = Set<Int>()
            for try await (version, oldest) in try await connection.query(
                "SELECT version, oldest_node FROM schema_migrations", logger: logger
            ).decode((Int, Int?).self) {
                recorded.insert(version)
                if version > Self.migrations.count, (oldest ?? version) > Self.migrations.count {
                    throw Self.newer(version)
                }
            }
            var applied: [HubMigration] = []
            for migration in Self.migrations where !recorded.contains(migration.version) {
                for statement in migration.statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query(
                    """
                    INSERT INTO schema_migrations (version, name, oldest_node)
                    VALUES (\(migration.version), \(migration.name), \(migration.oldestNode))
                    """, logger: logger)
                applied.append(migration)
            }
            return applied
        }
    }

    /// Every known migration with when it was applied (`nil`: pending), and the versions the
    /// database records that this build does not know (a newer chronicle migrated it), each with
    /// the oldest version whose nodes run beside it (`nil`: none older).
    public func migrationStatus() async throws -> (
        migrations: [(migration: HubMigration, applied: Date?)], unknown: [(version: Int, oldestNode: Int?)]
    ) {
        var applied: [Int: (date: Date, oldest: Int?)] = [:]
        let exists = try await client.query("SELECT to_regclass('schema_migrations') IS NOT NULL", logger: logger)
        var hasTable = false
        for try await value in exists.decode(Bool.self) { hasTable = value }
        if hasTable {
            // `oldest_node` through JSON: a database migrated before the column existed lacks it.
            let rows = try await client.query(
                "SELECT version, applied, (to_jsonb(m) ->> 'oldest_node')::integer FROM schema_migrations m ORDER BY version", logger: logger)
            for try await (version, date, oldest) in rows.decode((Int, Date, Int?).self) { applied[version] = (date, oldest) }
        }
        let known = Set(Self.migrations.map(\.version))
        let unknown = applied.filter { !known.contains($0.key) }.map { (version: $0.key, oldestNode: $0.value.oldest) }
        return (Self.migrations.map { ($0, applied[$0.version]?.date) }, unknown.sorted { $0.version < $1.version })
    }

    /// The refusal of a database a newer chronicle migrated past what this build runs beside.
    static func newer(_ version: Int) -> HubDatabaseUnavailable {
        HubDatabaseUnavailable(
            reason: "the hub's database has schema version \(version), newer than this chronicle knows (\(migrations.count)) "
                + "and not one it runs beside: upgrade chronicle")
    }

    /// Throws when this build must not serve the database: it lacks a version this build knows
    /// (run `chronicle hub migrate`), or records a newer one this build cannot run beside.
    public func checkSchema() async throws {
        let (migrations, unknown) = try await migrationStatus()
        let refusing = unknown.filter { ($0.oldestNode ?? Int.max) > Self.migrations.count }
        if let version = refusing.map(\.version).max() { throw Self.newer(version) }
        let pending = migrations.filter { $0.applied == nil }.map(\.migration.version)
        if !pending.isEmpty {
            throw HubDatabaseUnavailable(
                reason: "the hub's database lacks schema versions \(pending.map(String.init).joined(separator: ", ")): run `chronicle hub migrate` first")
        }
    }
}

/// One version of the hub's schema.
public struct HubMigration: Sendable {
    /// The version: 1, 2, 3, … in the order they apply.
    public let version: Int
    /// What it changes, for `chronicle hub migrate --status`.
    public let name: String
    /// Its SQL statements (each idempotent).
    public let statements: [String]
    /// The oldest version whose nodes still run beside this one (its own version when the
    /// previous nodes must stop first).
    public let oldestNode: Int

    init(version: Int, name: String, oldestNode: Int? = nil, statements: [String]) {
        self.version = version
        self.name = name
        self.oldestNode = oldestNode ?? version
        self.statements = statements
    }
}
