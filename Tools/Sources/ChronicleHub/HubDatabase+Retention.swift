@_spi(Wire) import ChronicleFormat
import Logging
import PostgresNIO
import Synchronization

/// Retention at the hub: a tenant's log keeps, of each key, the newest revisions each device
/// pushed (the tenant's `retain_revisions`, 100 by default) and each device's greatest one by
/// conflict order, so it holds live values, not every write, and its quota counts what it holds.
///
/// The hub cannot authenticate events, so revisions are counted per pushing device, and a row
/// counts for every device that pushed it (a carrier that relayed a member's event first cannot
/// then evict it with its own junk, since the member's push vouches for it too): what one token
/// pushes never evicts another device's events. Trimming runs after appends (once
/// ``trimThreshold`` events were appended to the tenant since a node last started a trim of it,
/// counted in the tenant's row by whichever node appends, or when a push met the quota), in
/// transactions of at most ``maxTrimmedPerTransaction`` rows that take the tenant's row lock only
/// for their last statement, so pushes and pulls never wait on it for long.
extension HubDatabase {
    /// Revisions of a key each device's pushes keep when the tenant sets none.
    public static let defaultRetainedRevisions: Int32 = 100
    /// Events appended to a tenant (on any node) between two trims.
    static let trimThreshold = 256
    /// Rows one trimming transaction deletes at most.
    static let maxTrimmedPerTransaction = 4_096

    /// Deletes what the tenant's retention does not keep, in transactions of at most
    /// ``maxTrimmedPerTransaction`` rows, until nothing is left to delete.
    /// - Returns: the rows deleted.
    @discardableResult
    public func trim(tenant: Int64) async throws -> Int {
        var total = 0
        while true {
            var deleted = 0
            for try await count in try await client.execute(TrimStatement(tenant: tenant, limit: Int64(Self.maxTrimmedPerTransaction)), logger: logger) {
                deleted = Int(count)
            }
            total += deleted
            if deleted < Self.maxTrimmedPerTransaction { return total }
        }
    }

    /// Starts a trim of `tenant` in the background, unless one of it runs on this node (another
    /// node's trim beside it is safe: a row is deleted, and counted, once).
    func startTrim(tenant: Int64) {
        let start = trims.withLock { running -> Bool in running.insert(tenant).inserted }
        guard start else { return }
        Task {
            do {
                try await self.trim(tenant: tenant)
            } catch {
                self.logger.debug("chronicle: trimming a tenant's log failed; the next appends retry", metadata: ["tenant": "\(tenant)", "error": "\(error)"])
            }
            self.trims.withLock { _ = $0.remove(tenant) }
        }
    }

    /// Sets how many revisions of a key each device's pushes keep in `tenant`'s log (`nil`: the
    /// default, 100; 0: every revision).
    public func setRetention(tenant: String, revisions: Int32?) async throws {
        let rows = try await client.query(
            "UPDATE tenants SET retain_revisions = \(revisions) WHERE name = \(tenant) RETURNING id", logger: logger)
        var id: Int64?
        for try await found in rows.decode(Int64.self) { id = found }
        guard let id else { throw HubRefusal.unknownTenant(tenant) }
        try await trim(tenant: id)
    }
}

/// One transaction of ``HubDatabase/trim(tenant:)``: ranks each (key, device)'s rows by position
/// and by conflict order, where a row counts for the device that stored it and every device that
/// pushed it again (`also_pushed_by`); deletes at most `limit` rows that no device keeps (among its
/// newest `retain_revisions`, or its greatest), and takes them off the tenant's counts. Rows of
/// events of a newer format (no key) are kept.
struct TrimStatement: PostgresPreparedStatement {
    static let sql = """
        WITH settings AS (
            SELECT COALESCE(retain_revisions, \(HubDatabase.defaultRetainedRevisions)) AS kept FROM tenants WHERE id = $1
        ), pairs AS (
            SELECT position, key, hlc, writer, counter, pusher
            FROM events, unnest(array_prepend(device, also_pushed_by)) AS pusher
            WHERE tenant_id = $1 AND key IS NOT NULL
        ), ranked AS (
            SELECT position,
                row_number() OVER (PARTITION BY key, pusher ORDER BY position DESC) AS newest,
                rank() OVER (PARTITION BY key, pusher ORDER BY hlc DESC, writer DESC, counter DESC) AS greatest
            FROM pairs
        ), doomed AS (
            SELECT r.position FROM ranked r, settings s
            GROUP BY r.position, s.kept
            HAVING s.kept > 0 AND bool_and(r.newest > s.kept AND r.greatest > 1)
            ORDER BY r.position LIMIT $2
        ), deleted AS (
            DELETE FROM events e USING doomed d WHERE e.tenant_id = $1 AND e.position = d.position
            RETURNING octet_length(e.body) AS size
        ), counted AS (
            UPDATE tenants SET event_count = event_count - (SELECT count(*) FROM deleted),
                byte_count = byte_count - (SELECT COALESCE(sum(size), 0) FROM deleted)
            WHERE id = $1 AND EXISTS (SELECT 1 FROM deleted)
        )
        SELECT count(*) FROM deleted
        """
    static let bindingDataTypes: [PostgresDataType] = [.int8, .int8]
    typealias Row = Int64

    var tenant: Int64
    var limit: Int64

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(tenant)
        bindings.append(limit)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Int64.self) }
}
