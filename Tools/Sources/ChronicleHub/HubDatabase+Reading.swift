@_spi(Wire) import ChronicleFormat
import NIOCore
import PostgresNIO

/// What devices read: a tenant's info and ranges of its log, each checking the device's token
/// in the statement that serves it.
extension HubDatabase {
    /// What the hub answers `GET /v1/info` with for a device's tenant, while its token stands.
    func info(device: HubDevice) async throws -> WireInfo {
        let hash = ByteBuffer(bytes: device.tokenHash)
        let rows = try await client.query(
            """
            SELECT t.relay_id, t.epoch, t.head FROM tenants t JOIN devices d ON d.tenant_id = t.id AND d.token_hash = \(hash)
            WHERE t.id = \(device.tenant)
            """, logger: logger)
        for try await (relay, epoch, head) in rows.decode((ByteBuffer, ByteBuffer, Int64).self) {
            return WireInfo(relay: Array(buffer: relay), epoch: Array(buffer: epoch), head: UInt64(head))
        }
        throw revoked(device)
    }

    /// A range of the device's tenant's log after position `after`, as `GET /v1/range` returns
    /// it, while the device's token stands: at most `maxEvents` events passing `filter` (and not
    /// written by `excluding`). Also returns how many events it holds, where it ends, and how
    /// many bytes of event bodies it sends (the only bodies the statement reads).
    ///
    /// The token check, the tenant's head and chain, the chain at the start, the events after it
    /// and the record of the device's progress (`pulled`, `last_seen`, when the range advances;
    /// recorded as the range is read, so a pull whose answer then fails still counts) are one statement, so one snapshot, in one round trip. The statement decides what the
    /// range sends: it scans at most 4,096 positions, and takes each while fewer than
    /// `maxEvents` sent events and less than the range's ~1 MiB of sent bodies come before it;
    /// the bodies of the events it sends are the only ones it reads (as an array in one row,
    /// so a row never holds more than that and one event). What the filter or the writer
    /// leaves out costs neither a read nor room in the range, and the range still ends past it.
    /// The wrapped keys the events name are a second statement: they committed with or before
    /// the events that name them, so a later snapshot holds them too (unless the operator
    /// dropped them in between, which is what dropping them means).
    func range(
        device: HubDevice, after: UInt64, filter: RangeFilter, excluding writer: [UInt8]?, maxEvents: Int
    ) async throws -> (bytes: [UInt8], events: Int, upTo: UInt64, sentBytes: Int) {
        let tenant = device.tenant
        // Any `after` past the head is answered from the head: Int64.max is past every head.
        let asked = Int64(clamping: after)
        // RelayRange.admits, in SQL: `.syncable` sends what is not `.never` (and what has no
        // policy: opaque items); `.automaticSmall` sends `.automaticSmall` events up to its size.
        let (everySyncable, maxPayload): (Bool, Int64) = switch filter {
        case .syncable: (true, 0)
        case let .automaticSmall(limit): (false, Int64(limit))
        }
        let statement = RangeStatement(
            tokenHash: ByteBuffer(bytes: device.tokenHash), asked: asked, everySyncable: everySyncable, maxPayload: maxPayload,
            excluded: writer.map { ByteBuffer(bytes: $0) }, maxEvents: Int64(clamping: maxEvents), tenant: tenant)
        let rows = try await client.execute(statement, logger: logger)
        typealias Row = RangeStatement.Row
        var found: Row?
        for try await row in rows { found = row }
        guard let (relay, epoch, storedHead, headChain, chainAtStart, lastPosition, lastChain, sent) = found else {
            throw revoked(device)
        }
        let head = UInt64(max(0, storedHead))
        // A checkpoint past the head (the database restored from an older backup): answer from
        // the head, and the puller starts again from 0.
        let start = min(after, head)
        var afterChain = RelayRange.emptyChain
        if start == head {
            afterChain = Array(buffer: headChain)
        } else if start > 0, let chainAtStart {
            afterChain = Array(buffer: chainAtStart)
        }
        var upTo = start
        var upToChain = afterChain
        if let lastPosition, let lastChain, lastPosition > Int64(clamping: start) {
            upTo = UInt64(lastPosition)
            upToChain = Array(buffer: lastChain)
        }
        let bodies = (sent ?? []).map { Array(buffer: $0) }
        // Only the key records the pulled events name (every record under each id: a relay
        // cannot tell a carrier's record from the real one; members open what opens).
        var keys: [[UInt8]] = []
        let named = Set(bodies.flatMap { RelayRange.keyIDs(ofItem: $0) }).map { ByteBuffer(bytes: $0) }
        if !named.isEmpty {
            let rows = try await client.query(
                """
                SELECT body FROM wrapped_keys WHERE tenant_id = \(tenant) AND key_id = ANY(\(named)::bytea[])
                ORDER BY key_id, digest LIMIT \(Self.maxKeys)
                """, logger: logger)
            for try await body in rows.decode(ByteBuffer.self) { keys.append(Array(buffer: body)) }
        }
        let encoded = RelayRange.encode(
            source: Array(buffer: relay), epoch: Array(buffer: epoch), after: start, upTo: upTo, head: head, afterChain: afterChain,
            upToChain: upToChain, keys: keys, events: bodies)
        return (encoded, bodies.count, upTo, bodies.reduce(0) { $0 + $1.count })
    }
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
