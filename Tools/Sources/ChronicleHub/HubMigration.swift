// The hub's schema, version by version (applied by HubDatabase+Schema.swift).
//
// Policy (docs/HUB.md, "Upgrades"): a version records the oldest version whose nodes still run
// beside it (`schema_migrations.oldest_node`). An expanding version (a table, a column with a
// default, an index) names the version before it, so the previous nodes keep serving while the
// new ones roll out; a version that takes something away (a column, a table the previous nodes
// read) comes one release after the nodes stopped using it, and names itself. A node serves a
// database whose unknown versions all name a version it knows, and refuses any other.

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

extension HubMigration {
    /// The schema's versions, oldest first: each is applied once, in order, and recorded in
    /// `schema_migrations` with when it was applied (docs/FORMAT.md, section 13).
    public static let all: [HubMigration] = [
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
}
