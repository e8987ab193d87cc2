@_spi(Wire) import ChronicleFormat
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// Retention at the hub: a tenant's log keeps, of each key, the newest revisions each device
/// pushed (the tenant's `retain_revisions`, 100 by default) and each device's greatest one by
/// conflict order, so it holds live values, not every write, and its quota counts what it holds.
///
/// The hub cannot authenticate events, so revisions are counted per pushing device, and a row
/// counts for every device that pushed it (a carrier that relayed a member's event first cannot
/// then evict it with its own junk, since the member's push vouches for it too): what one token
/// pushes never evicts another device's events.
///
/// A trim reads what changed, not the tenant: each append (and each push that vouches for a
/// stored row) marks its keys in `trim_pending`, where every node sees them, and a trim ranks the
/// rows of the marked keys only, a bounded number of keys a statement, then clears the marks it
/// saw (a mark renewed meanwhile stays for the next trim). Changing the tenant's retention, and
/// the migration that made trims incremental, set the tenant's `sweep_from`: trims then walk
/// every key in steps, marking them, until the walk reaches the end. A trim runs after appends
/// (once ``trimThreshold`` events were appended to the tenant since a node last started one,
/// counted in the tenant's row by whichever node appends, or when a push met the quota); each
/// step holds the tenant's row lock, as a push does, so a push waits at most one step.
extension HubDatabase {
    /// Revisions of a key each device's pushes keep when the tenant sets none.
    public static let defaultRetainedRevisions: Int32 = 100
    /// Events appended to a tenant (on any node) between two trims.
    static let trimThreshold = 256
    /// Rows one trimming statement deletes at most.
    static let maxTrimmedPerTransaction = 4_096
    /// Keys one step of a trim ranks (and one step of a sweep marks).
    public static let trimKeysPerStep = 64

    /// Deletes what the tenant's retention does not keep among its marked keys (and, while a
    /// sweep is due, every key), a step of at most `keysPerStep` keys at a time, until the keys
    /// marked when it started are done.
    /// - Parameter progress: called after each step with the totals so far.
    /// - Returns: what it read and deleted.
    @discardableResult
    public func trim(
        tenant: Int64, keysPerStep: Int = HubDatabase.trimKeysPerStep, progress: (@Sendable (HubTrim) -> Void)? = nil
    ) async throws -> HubTrim {
        let keysPerStep = max(1, keysPerStep)
        var total = HubTrim()
        var after: [UInt8] = []
        while true {
            let sweep = try await sweepStep(tenant: tenant, keys: keysPerStep)
            let step = try await trimStep(tenant: tenant, after: after, upTo: sweep.reached, keys: keysPerStep)
            total.deleted += step.deleted
            total.rowsRead += step.rowsRead
            total.steps += 1
            total.stepKeys = step.keys.count
            // Done with these keys only when the step chose fewer rows than it may delete (what it
            // deleted may be fewer: another trim deleted some first); else the same keys again.
            if let last = step.keys.last, step.doomed < Self.maxTrimmedPerTransaction {
                total.keys += step.keys.count
                after = last
                try await clearMarks(tenant: tenant, keys: step.keys, marks: step.marks)
            }
            if !step.keys.isEmpty || sweep.marked > 0 { progress?(total) }
            if step.keys.isEmpty, sweep.reached == nil { return total }
        }
    }

    /// One step of a sweep, when the tenant has one due: marks the next `keys` keys after its
    /// `sweep_from` and moves it on (to NULL past the last key).
    /// - Returns: the keys marked, and the last key the sweep marked so far (`nil`: no sweep runs).
    private func sweepStep(tenant: Int64, keys: Int) async throws -> (marked: Int, reached: [UInt8]?) {
        var from: [UInt8]?
        for try await value in try await client.query("SELECT sweep_from FROM tenants WHERE id = \(tenant)", logger: logger)
            .decode(ByteBuffer?.self) { from = value.map { Array(buffer: $0) } }
        guard let from else { return (0, nil) }
        var (marked, last): (Int64, [UInt8]?) = (0, nil)
        for try await (count, key) in try await client.execute(SweepStatement(tenant: tenant, after: from, limit: Int64(keys)), logger: logger) {
            (marked, last) = (count, key.map { Array(buffer: $0) })
        }
        let next = marked < keys ? nil : last.map { ByteBuffer(bytes: $0) }
        try await client.query(
            "UPDATE tenants SET sweep_from = \(next) WHERE id = \(tenant) AND sweep_from = \(ByteBuffer(bytes: from))", logger: logger)
        return (Int(marked), next == nil ? nil : last)
    }

    /// One step of a trim: the marked keys after `after` (up to `upTo`, the sweep's reach, while
    /// one runs), their rows ranked and what no device keeps deleted. It takes the tenant's row
    /// lock first, as a push does, so the two never wait on each other in opposite orders, and
    /// its statement's snapshot holds whatever a trim step before it committed.
    private func trimStep(tenant: Int64, after: [UInt8], upTo: [UInt8]?, keys: Int) async throws
        -> (deleted: Int, doomed: Int, rowsRead: Int, keys: [[UInt8]], marks: [Int64])
    {
        let statement = TrimStatement(
            tenant: tenant, limit: Int64(Self.maxTrimmedPerTransaction), after: ByteBuffer(bytes: after), upTo: upTo.map { ByteBuffer(bytes: $0) },
            keys: Int64(keys))
        return try await transaction { connection in
            try await connection.query("SELECT id FROM tenants WHERE id = \(tenant) FOR UPDATE", logger: logger)
            var result: (deleted: Int, doomed: Int, rowsRead: Int, keys: [[UInt8]], marks: [Int64]) = (0, 0, 0, [], [])
            for try await (deleted, doomed, read, keys, marks) in try await connection.execute(statement, logger: logger) {
                result = (Int(deleted), Int(doomed), Int(read), (keys ?? []).map { Array(buffer: $0) }, marks ?? [])
            }
            return result
        }
    }

    /// Clears the marks a step read, where they did not change since (a push that marked a key
    /// again meanwhile renewed its `marks`, drawn from a sequence, so it stays for the next
    /// trim); a mark a push holds locked now is skipped, not waited for (the push renews it).
    private func clearMarks(tenant: Int64, keys: [[UInt8]], marks: [Int64]) async throws {
        try await client.query(
            """
            DELETE FROM trim_pending p WHERE p.tenant_id = \(tenant) AND (p.key, p.marks) IN (
                SELECT q.key, q.marks FROM trim_pending q
                JOIN unnest(\(keys.map { ByteBuffer(bytes: $0) })::bytea[], \(marks)::bigint[]) AS u(key, marks)
                    ON q.key = u.key AND q.marks = u.marks
                WHERE q.tenant_id = \(tenant) ORDER BY q.key FOR UPDATE OF q SKIP LOCKED)
            """, logger: logger)
    }

    /// Starts a trim of `tenant` in the background, unless one of it runs on this node (another
    /// node's trim beside it is safe: a row is deleted, and counted, once).
    func startTrim(tenant: Int64) {
        // The task is made under the lock, so its own removal (under the lock too) follows its entry.
        trims.withLock { running in
            guard running[tenant] == nil else { return }
            running[tenant] = Task {
                let metrics = self.metrics.withLock { $0 }
                let start = ContinuousClock.now
                do {
                    let trim = try await self.trim(tenant: tenant)
                    metrics?.count(.trims, [("result", "done")])
                    metrics?.count(.trimmedRows, by: Int64(trim.deleted))
                } catch {
                    metrics?.count(.trims, [("result", "failed")])
                    self.logger.debug("chronicle: trimming a tenant's log failed; the next appends retry", metadata: ["tenant": "\(tenant)", "error": "\(error)"])
                }
                metrics?.observe(.trimDuration, [], ContinuousClock.now - start)
                self.trims.withLock { _ = $0.removeValue(forKey: tenant) }
            }
        }
    }

    /// Waits for the trims this node runs now (tests wait on them rather than poll the counts).
    func trimsFinish() async {
        for trim in trims.withLock({ Array($0.values) }) { await trim.value }
    }

    /// Sets how many revisions of a key each device's pushes keep in `tenant`'s log (`nil`: the
    /// default, 100; 0: every revision), and trims every key of the tenant to it, in steps of
    /// `keysPerStep` keys (each step its own statements, so appends never wait long).
    /// - Parameter progress: called after each step with the totals so far.
    /// - Returns: what the trim read and deleted.
    @discardableResult
    public func setRetention(
        tenant: String, revisions: Int32?, keysPerStep: Int = HubDatabase.trimKeysPerStep, progress: (@Sendable (HubTrim) -> Void)? = nil
    ) async throws -> HubTrim {
        let rows = try await client.query(
            "UPDATE tenants SET retain_revisions = \(revisions), sweep_from = ''::bytea WHERE name = \(tenant) RETURNING id", logger: logger)
        var id: Int64?
        for try await found in rows.decode(Int64.self) { id = found }
        guard let id else { throw HubRefusal.unknownTenant(tenant) }
        return try await trim(tenant: id, keysPerStep: keysPerStep, progress: progress)
    }
}

/// What a trim did: the rows it deleted, the keys and rows it read, in how many steps.
public struct HubTrim: Sendable, Equatable, CustomStringConvertible {
    /// Rows deleted.
    public var deleted = 0
    /// Keys whose rows were ranked.
    public var keys = 0
    /// Rows read to rank them.
    public var rowsRead = 0
    /// Steps (each a statement of at most ``HubDatabase/trimKeysPerStep`` keys).
    public var steps = 0
    /// Keys of the last step.
    public var stepKeys = 0

    /// Nothing done yet.
    public init() {}

    public var description: String {
        func count(_ value: Int, _ noun: String) -> String { "\(value) \(noun)\(value == 1 ? "" : "s")" }
        return "\(count(keys, "key")), \(count(rowsRead, "row")) read, \(deleted) deleted in \(count(steps, "step"))"
    }
}

/// One step of ``HubDatabase/trim(tenant:keysPerStep:progress:)``: takes the tenant's next
/// marked keys (after `$3`, up to `$4` when a sweep runs, at most `$5`), ranks their rows per
/// (key, device) by position and by conflict order, where a row counts for the device that stored
/// it and every device that pushed it again (`also_pushed_by`); deletes at most `$2` rows that no
/// device keeps (among its newest `retain_revisions`, or its greatest), and takes them off the
/// tenant's counts. Returns the rows deleted, chosen and read, and the keys with their marks
/// (to clear).
struct TrimStatement: PostgresPreparedStatement {
    static let sql = """
        WITH settings AS (
            SELECT COALESCE(retain_revisions, \(HubDatabase.defaultRetainedRevisions)) AS kept FROM tenants WHERE id = $1
        ), marked AS (
            SELECT key, marks FROM trim_pending
            WHERE tenant_id = $1 AND key > $3 AND ($4::bytea IS NULL OR key <= $4::bytea)
            ORDER BY key LIMIT $5
        ), pairs AS (
            SELECT e.position, e.key, e.hlc, e.writer, e.counter, cardinality(e.also_pushed_by) AS vouches, pusher
            FROM marked m JOIN events e ON e.tenant_id = $1 AND e.key = m.key,
                unnest(array_prepend(e.device, e.also_pushed_by)) AS pusher
        ), ranked AS (
            SELECT position, vouches,
                row_number() OVER (PARTITION BY key, pusher ORDER BY position DESC) AS newest,
                rank() OVER (PARTITION BY key, pusher ORDER BY hlc DESC, writer DESC, counter DESC) AS greatest
            FROM pairs
        ), doomed AS (
            SELECT r.position, max(r.vouches) AS vouches FROM ranked r, settings s
            GROUP BY r.position, s.kept
            HAVING s.kept > 0 AND bool_and(r.newest > s.kept AND r.greatest > 1)
            ORDER BY r.position LIMIT $2
        ), deleted AS (
            -- A row a push vouched for since this statement's snapshot counts for one more
            -- device now: it is not deleted (PostgreSQL rechecks this against the row's newest version).
            DELETE FROM events e USING doomed d
            WHERE e.tenant_id = $1 AND e.position = d.position AND cardinality(e.also_pushed_by) = d.vouches
            RETURNING octet_length(e.body) AS size
        ), counted AS (
            UPDATE tenants SET event_count = event_count - (SELECT count(*) FROM deleted),
                byte_count = byte_count - (SELECT COALESCE(sum(size), 0) FROM deleted)
            WHERE id = $1 AND EXISTS (SELECT 1 FROM deleted)
        )
        SELECT (SELECT count(*) FROM deleted), (SELECT count(*) FROM doomed), (SELECT count(DISTINCT position) FROM pairs),
            (SELECT array_agg(key ORDER BY key) FROM marked), (SELECT array_agg(marks ORDER BY key) FROM marked)
        """
    static let bindingDataTypes: [PostgresDataType] = [.int8, .int8, .bytea, .bytea, .int8]
    typealias Row = (Int64, Int64, Int64, [ByteBuffer]?, [Int64]?)

    var tenant: Int64
    var limit: Int64
    var after: ByteBuffer
    var upTo: ByteBuffer?
    var keys: Int64

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 5)
        bindings.append(tenant)
        bindings.append(limit)
        bindings.append(after)
        bindings.append(upTo)
        bindings.append(keys)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
}

/// One step of a sweep: the tenant's next `$3` distinct keys after `$2` (one index probe each,
/// however many rows a key has), marked for the trim. Returns how many and the last.
struct SweepStatement: PostgresPreparedStatement {
    static let sql = """
        WITH RECURSIVE walk(key) AS (
            (SELECT key FROM events WHERE tenant_id = $1 AND key > $2 ORDER BY key LIMIT 1)
            UNION ALL
            SELECT (SELECT e.key FROM events e WHERE e.tenant_id = $1 AND e.key > w.key ORDER BY e.key LIMIT 1)
            FROM walk w WHERE w.key IS NOT NULL
        ), found AS (
            SELECT key FROM walk WHERE key IS NOT NULL LIMIT $3
        ), marked AS (
            INSERT INTO trim_pending (tenant_id, key) SELECT $1, key FROM found ORDER BY key
            ON CONFLICT (tenant_id, key) DO UPDATE SET marks = nextval('trim_marks')
        )
        SELECT (SELECT count(*) FROM found), (SELECT key FROM found ORDER BY key DESC LIMIT 1)
        """
    static let bindingDataTypes: [PostgresDataType] = [.int8, .bytea, .int8]
    typealias Row = (Int64, ByteBuffer?)

    var tenant: Int64
    var after: [UInt8]
    var limit: Int64

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 3)
        bindings.append(tenant)
        bindings.append(ByteBuffer(bytes: after))
        bindings.append(limit)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
}
