import NIOCore
import PostgresNIO

// The statements of a tenant's push transaction that run on every commit, prepared once per
// pooled connection (parsed and planned once, not once per transaction). Their text is fixed;
// what varies is bound, the pushes' events as arrays.

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

/// The events, the tenant's head and counts, the devices' counts and the other nodes' wake-up,
/// in one round trip (data-modifying WITH clauses run whether or not the query reads them).
struct PushWriteStatement: PostgresPreparedStatement {
    static let sql = """
        WITH appended AS (
            INSERT INTO events (tenant_id, position, writer, counter, policy, payload_size, body, chain)
            SELECT $1, * FROM unnest($2::bigint[], $3::bytea[], $4::bigint[], $5::smallint[], $6::integer[], $7::bytea[], $8::bytea[])
        ), counted AS (
            UPDATE tenants SET head = $9, chain = $10, event_count = event_count + $11, byte_count = byte_count + $12
            WHERE id = $1 AND $13
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
    ]
    typealias Row = ()

    var tenant: Int64
    var positions: [Int64], writers: [ByteBuffer], counters: [Int64], policies: [Int16], sizes: [Int32]
    var bodies: [ByteBuffer], chains: [ByteBuffer]
    var head: Int64, chain: ByteBuffer, addedEvents: Int64, addedBytes: Int64, changed: Bool
    var devices: [String], pushedCounts: [Int64]
    var channel: String, payload: String, notify: Bool

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 18)
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
        bindings.append(devices)
        bindings.append(pushedCounts)
        bindings.append(channel)
        bindings.append(payload)
        bindings.append(notify)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { () }
}
