import NIOCore
import PostgresNIO

// The hub's most frequent statements, prepared once per pooled connection (parsed and planned
// once, not once per request): a pull's range, and the two statements every push transaction
// runs. Their text is fixed; what varies is bound (a push's events as arrays).

/// In a snapshot taken once the tenant's row lock is held: which of the pushes' tokens still
/// stand (their device rows share-locked until the commit, so a revocation waits for it), and
/// the bodies the tenant stores already under the pushed events' identities.
struct PushCheckStatement: PostgresPreparedStatement {
    static let sql = """
        SELECT NULL::bytea, NULL::bigint, NULL::bytea,
            array(SELECT token_hash FROM devices WHERE tenant_id = $1 AND token_hash = ANY($2::bytea[]) FOR KEY SHARE)
        UNION ALL
        SELECT e.writer, e.counter, e.body, NULL::bytea[] FROM events e
        JOIN (SELECT DISTINCT * FROM unnest($3::bytea[], $4::bigint[])) AS u(writer, counter)
          ON e.writer = u.writer AND e.counter = u.counter
        WHERE e.tenant_id = $1
        """
    static let bindingDataTypes: [PostgresDataType] = [.int8, .byteaArray, .byteaArray, .int8Array]
    typealias Row = (ByteBuffer?, Int64?, ByteBuffer?, [ByteBuffer]?)

    var tenant: Int64
    var tokenHashes: [ByteBuffer]
    var writers: [ByteBuffer]
    var counters: [Int64]

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 4)
        bindings.append(tenant)
        bindings.append(tokenHashes)
        bindings.append(writers)
        bindings.append(counters)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
}

/// The events, the tenant's head and counts, the keys the next trim reads (those appended or
/// vouched for), the devices' counts and the other nodes' wake-up, in one round trip (data-modifying WITH clauses run whether or not the query reads them).
struct PushWriteStatement: PostgresPreparedStatement {
    static let sql = """
        WITH appended AS (
            INSERT INTO events (tenant_id, position, writer, counter, policy, payload_size, body, chain, key, hlc, device)
            SELECT $1, p, w, c, po, s, b, ch, NULLIF(k, ''::bytea), CASE WHEN k = ''::bytea THEN NULL ELSE h END, d
            FROM unnest(
                $2::bigint[], $3::bytea[], $4::bigint[], $5::smallint[], $6::integer[], $7::bytea[], $8::bytea[],
                $19::bytea[], $20::bigint[], $21::text[]) AS u(p, w, c, po, s, b, ch, k, h, d)
        ), counted AS (
            UPDATE tenants SET head = $9, chain = $10, event_count = event_count + $11, byte_count = byte_count + $12,
                appended_since_trim = $22
            WHERE id = $1 AND $13
        ), vouched AS (
            -- Every device that vouches for a row in this commit (several may, in one batch).
            UPDATE events e SET also_pushed_by = e.also_pushed_by || array(
                    SELECT DISTINCT x FROM unnest(u.ds) AS x WHERE x IS DISTINCT FROM e.device AND NOT (x = ANY(e.also_pushed_by)) ORDER BY x)
            FROM (
                SELECT w, c, b, array_agg(d) AS ds FROM unnest($23::bytea[], $24::bigint[], $25::bytea[], $26::text[]) AS v(w, c, b, d)
                GROUP BY w, c, b
            ) AS u
            WHERE e.tenant_id = $1 AND e.writer = u.w AND e.counter = u.c AND e.body = u.b
                AND EXISTS (SELECT 1 FROM unnest(u.ds) AS x WHERE x IS DISTINCT FROM e.device AND NOT (x = ANY(e.also_pushed_by)))
            RETURNING e.key
        ), marked AS (
            -- In key order, as a trim's clearing and a sweep lock marks: never in opposite orders.
            INSERT INTO trim_pending (tenant_id, key)
            SELECT $1, m.k FROM (SELECT unnest($19::bytea[]) UNION SELECT key FROM vouched) AS m(k)
            WHERE m.k IS NOT NULL AND m.k <> ''::bytea
            ORDER BY m.k
            ON CONFLICT (tenant_id, key) DO UPDATE SET marks = nextval('trim_marks')
        ), seen AS (
            UPDATE devices d SET last_seen = now(), pushed = d.pushed + u.count
            FROM unnest($14::text[], $15::bigint[]) AS u(name, count)
            WHERE d.tenant_id = $1 AND d.name = u.name
        )
        SELECT pg_notify($16, $17) WHERE $18
        """
    static let bindingDataTypes: [PostgresDataType] = [
        .int8, .int8Array, .byteaArray, .int8Array, .int2Array, .int4Array, .byteaArray, .byteaArray,
        .int8, .bytea, .int8, .int8, .bool, .textArray, .int8Array, .text, .text, .bool,
        .byteaArray, .int8Array, .textArray, .int8, .byteaArray, .int8Array, .byteaArray, .textArray,
    ]
    typealias Row = ()

    var tenant: Int64
    var positions: [Int64], writers: [ByteBuffer], counters: [Int64], policies: [Int16], sizes: [Int32]
    var bodies: [ByteBuffer], chains: [ByteBuffer]
    /// Per event: its key (empty: a newer format, stored as NULL), HLC and the device that pushed
    /// it (retention's inputs).
    var keys: [ByteBuffer], hlcs: [Int64], devices: [String]
    var head: Int64, chain: ByteBuffer, addedEvents: Int64, addedBytes: Int64
    /// The tenant's count of events appended since its last trim, after this write (0: a trim starts).
    var appendedSinceTrim: Int64
    /// Events the tenant stores already that a device pushed again: it vouches for them too.
    var vouchWriters: [ByteBuffer], vouchCounters: [Int64], vouchBodies: [ByteBuffer], vouchDevices: [String]
    var changed: Bool
    var pushers: [String], pushedCounts: [Int64]
    var channel: String, payload: String, notify: Bool

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 26)
        bindings.append(tenant)
        bindings.append(positions)
        bindings.append(writers)
        bindings.append(counters)
        bindings.append(policies)
        bindings.append(sizes)
        bindings.append(bodies)
        bindings.append(chains)
        bindings.append(head)
        bindings.append(chain)
        bindings.append(addedEvents)
        bindings.append(addedBytes)
        bindings.append(changed)
        bindings.append(pushers)
        bindings.append(pushedCounts)
        bindings.append(channel)
        bindings.append(payload)
        bindings.append(notify)
        bindings.append(keys)
        bindings.append(hlcs)
        bindings.append(devices)
        bindings.append(appendedSinceTrim)
        bindings.append(vouchWriters)
        bindings.append(vouchCounters)
        bindings.append(vouchBodies)
        bindings.append(vouchDevices)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { () }
}

/// The statement of ``HubDatabase/range(device:after:filter:excluding:maxEvents:)``, prepared
/// once per connection: a pull is the hub's most frequent request (every long-poll makes one or
/// two), and this is its only statement when nothing is new, so parsing and planning it once
/// per connection, not once per pull, is most of what an empty poll costs the database.
struct RangeStatement: PostgresPreparedStatement {
    // $3 and $4 are RelayRange.admits in SQL (0 is `SyncPolicy.never`, 2 `.automaticSmall`, as
    // FORMAT.md gives them; `aPullSendsWhatRelayRangeAdmits` checks the statement against it);
    // $5 is the writer left out. The bounds are literals, so a generic plan knows them too.
    static let sql = """
        WITH r AS (
        SELECT t.relay_id, t.epoch, t.head, t.chain AS head_chain, a.chain AS start_chain, e.up_to, e.up_to_chain, e.bodies
        FROM tenants t
        JOIN devices d ON d.tenant_id = t.id AND d.token_hash = $1
        LEFT JOIN events a ON a.tenant_id = t.id AND a.position = least($2, t.head)
        LEFT JOIN LATERAL (
            SELECT max(s.position) AS up_to, (array_agg(s.chain ORDER BY s.position DESC))[1] AS up_to_chain,
                array_agg(s.body ORDER BY s.position) FILTER (WHERE s.sent) AS bodies
            FROM (
                SELECT position, chain, sent, CASE WHEN sent THEN body END AS body,
                    coalesce(sum(CASE WHEN sent THEN octet_length(body) END) OVER w, 0)
                        - CASE WHEN sent THEN octet_length(body) ELSE 0 END AS bytes_before,
                    count(*) FILTER (WHERE sent) OVER w - sent::int AS sent_before
                FROM (
                    SELECT position, chain, body,
                        (CASE WHEN $3 THEN policy <> 0 ELSE policy = 2 AND payload_size <= $4 END)
                        AND ($5::bytea IS NULL OR writer IS DISTINCT FROM $5::bytea) AS sent
                    FROM events
                    WHERE tenant_id = t.id AND position > least($2, t.head) AND position <= t.head
                    ORDER BY position LIMIT \(HubDatabase.scanLimit)) r
                WINDOW w AS (ORDER BY position)) s
            WHERE s.bytes_before < \(HubDatabase.pullBytes) AND s.sent_before < $6
        ) e ON true
        WHERE t.id = $7),
        progress AS (
            UPDATE devices d SET last_seen = now(), pulled = GREATEST(d.pulled, r.up_to) FROM r
            WHERE d.tenant_id = $7 AND d.token_hash = $1 AND r.up_to > least($2, r.head))
        SELECT relay_id, epoch, head, head_chain, start_chain, up_to, up_to_chain, bodies FROM r
        """
    static let bindingDataTypes: [PostgresDataType] = [.bytea, .int8, .bool, .int8, .bytea, .int8, .int8]

    typealias Row = (ByteBuffer, ByteBuffer, Int64, ByteBuffer, ByteBuffer?, Int64?, ByteBuffer?, [ByteBuffer]?)

    var tokenHash: ByteBuffer
    var asked: Int64
    var everySyncable: Bool
    var maxPayload: Int64
    var excluded: ByteBuffer?
    var maxEvents: Int64
    var tenant: Int64

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 7)
        bindings.append(tokenHash)
        bindings.append(asked)
        bindings.append(everySyncable)
        bindings.append(maxPayload)
        bindings.append(excluded)
        bindings.append(maxEvents)
        bindings.append(tenant)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
}
