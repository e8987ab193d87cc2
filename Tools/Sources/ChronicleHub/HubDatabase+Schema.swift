public import Foundation
import PostgresNIO

// Applying the hub's schema (its versions are in HubMigration.swift), and whether this node may
// serve a database.

extension HubDatabase {
    /// The schema's versions, oldest first (``HubMigration/all``).
    public static var migrations: [HubMigration] { HubMigration.all }

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
