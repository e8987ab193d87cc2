@_spi(Wire) import ChronicleFormat
import NIOCore
import PostgresNIO

/// What devices read: a tenant's info and ranges of its log, each checking the device's token
/// in the statement that serves it.
struct TenantReads: Sendable {
    let database: HubDatabase

    private var client: PostgresClient { database.client }
    private var logger: Logger { database.logger }
}

extension HubDatabase {
    var reads: TenantReads { TenantReads(database: self) }
}

extension TenantReads {
    /// What the hub answers `GET /v1/info` with for a device's tenant, while its token stands.
    /// With the tenant's relay id, epoch and head, it names the device's push marks
    /// (``PushMarks``): how far the tenant holds what the device pushed of each of its logs.
    func info(device: HubDevice) async throws -> WireInfo {
        let hash = ByteBuffer(bytes: device.tokenHash)
        let rows = try await client.query(
            """
            SELECT t.relay_id, t.epoch, t.head, m.sources, m.epochs, m.filters, m.up_tos, m.chains
            FROM tenants t JOIN devices d ON d.tenant_id = t.id AND d.token_hash = \(hash)
            LEFT JOIN LATERAL (
                SELECT array_agg(source) AS sources, array_agg(epoch) AS epochs, array_agg(filter) AS filters, array_agg(up_to) AS up_tos,
                    array_agg(COALESCE(up_to_chain, ''::bytea)) AS chains
                FROM (
                    SELECT source, epoch, filter, up_to, up_to_chain FROM push_marks p WHERE p.tenant_id = t.id AND p.device = d.name
                    ORDER BY moved DESC LIMIT \(PushMarks.maxPerDevice)
                ) newest
            ) m ON true
            WHERE t.id = \(device.tenant)
            """, logger: logger)
        for try await (relay, epoch, head, sources, epochs, filters, upTos, chains) in rows.decode(
            (ByteBuffer, ByteBuffer, Int64, [ByteBuffer]?, [ByteBuffer]?, [String]?, [Int64]?, [ByteBuffer]?).self)
        {
            let (sources, epochs, filters, upTos, chains) = (sources ?? [], epochs ?? [], filters ?? [], upTos ?? [], chains ?? [])
            let marks = sources.indices.compactMap { index -> WirePushMark? in
                // The array aggregates of one row have one entry per mark, in the same order.
                guard [epochs.count, filters.count, upTos.count, chains.count].allSatisfy({ $0 > index }) else { return nil }
                let chain = Array(buffer: chains[index])
                return WirePushMark(
                    source: Array(buffer: sources[index]), epoch: Array(buffer: epochs[index]), filter: filters[index],
                    upTo: UInt64(max(0, upTos[index])), upToChain: chain.isEmpty ? nil : chain)
            }
            return WireInfo(relay: Array(buffer: relay), epoch: Array(buffer: epoch), head: UInt64(head), pushMarks: marks)
        }
        throw database.revoked(device)
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
            throw database.revoked(device)
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
        // cannot tell a carrier's record from the real one; members open what opens), each id's
        // oldest first: the record that came with the events that first named the id leads.
        let keys = try await keyRecords(tenant: tenant, namedBy: bodies)
        let encoded = RelayRange.encode(
            source: Array(buffer: relay), epoch: Array(buffer: epoch), after: start, upTo: upTo, head: head, afterChain: afterChain,
            upToChain: upToChain, keys: keys, events: bodies)
        return (encoded, bodies.count, upTo, bodies.reduce(0) { $0 + $1.count })
    }

    /// The tenant's key records under the ids `bodies` name, each id's oldest first (at most
    /// ``maxKeys``).
    func keyRecords(tenant: Int64, namedBy bodies: [[UInt8]]) async throws -> [[UInt8]] {
        var keys: [[UInt8]] = []
        let named = Set(bodies.flatMap { RelayRange.keyIDs(ofItem: $0) }).map { ByteBuffer(bytes: $0) }
        guard !named.isEmpty else { return [] }
        let rows = try await client.query(
            """
            SELECT body FROM wrapped_keys WHERE tenant_id = \(tenant) AND key_id = ANY(\(named)::bytea[])
            ORDER BY key_id, arrival LIMIT \(HubDatabase.maxKeys)
            """, logger: logger)
        for try await body in rows.decode(ByteBuffer.self) { keys.append(Array(buffer: body)) }
        return keys
    }

    /// The tenant's events with these identities (up to `versionsPerIdentity` bodies stored under
    /// each, each pushing device's smallest first: a relay cannot tell a carrier's from a
    /// member's), each identity's smallest first, at most ~1 MiB of bodies (at least one), with the key records they name,
    /// as the range `POST /v1/events` answers: its `after` and `upTo` are both the head, so it
    /// moves no puller's checkpoint. `whole` says for each distinct identity whether every body
    /// stored under it fitted.
    func events(device: HubDevice, _ identities: [EventIdentity]) async throws -> (bytes: [UInt8], events: Int, whole: [Bool]) {
        let tenant = device.tenant
        let hash = ByteBuffer(bytes: device.tokenHash)
        var found: (ByteBuffer, ByteBuffer, Int64, ByteBuffer)?
        for try await row in try await client.query(
            """
            SELECT t.relay_id, t.epoch, t.head, t.chain FROM tenants t JOIN devices d ON d.tenant_id = t.id AND d.token_hash = \(hash)
            WHERE t.id = \(tenant)
            """, logger: logger
        ).decode((ByteBuffer, ByteBuffer, Int64, ByteBuffer).self) { found = row }
        guard let (relay, epoch, storedHead, chain) = found else { throw database.revoked(device) }
        let asked = EventIdentity.distinct(identities)  // a repeated identity is looked up once
        let writers = asked.map { ByteBuffer(bytes: $0.writer.bytes) }
        let counters = asked.map { Int64(clamping: $0.counter) }
        var bodies: [[UInt8]] = []
        var whole = [Bool](repeating: true, count: asked.count)
        if !asked.isEmpty {
            // Each identity's bodies, each pushing device's smallest first (a token holder's many
            // small forgeries cannot push the genuine body, which another device pushed, out of
            // an answer), at most one more than an answer carries, to know whether it holds more.
            // Then each identity's first, then each one's next, smaller before larger: a body padded
            // to the bound cannot crowd the genuine one out. A body past the budget comes back as
            // NULL, so its identity is not answered whole. Bounded in time
            // (`eventRequestTimeoutMilliseconds`): 20,000 bodies under one identity cost ~130 ms.
            let perIdentity = Int64(HubDatabase.versionsPerIdentity)
            let rows = try await database.transaction { connection in
                try await connection.query("SET LOCAL statement_timeout = \(unescaped: String(HubDatabase.eventRequestTimeoutMilliseconds))", logger: logger)
                let rows = try await connection.query(
                    """
                    SELECT ordinal, CASE WHEN rank <= \(perIdentity) AND before < \(HubDatabase.pullBytes) THEN body END FROM (
                        SELECT r.ordinal, r.rank, r.body, r.length, r.position,
                            sum(r.length) OVER (ORDER BY r.rank, r.length, r.position) - r.length AS before
                        FROM (
                            SELECT w.ordinal, b.body, b.position, b.length,
                                row_number() OVER (PARTITION BY w.ordinal ORDER BY b.device_rank, b.length, b.position) AS rank
                            FROM unnest(\(writers)::bytea[], \(counters)::bigint[]) WITH ORDINALITY AS w(writer, counter, ordinal)
                            CROSS JOIN LATERAL (
                                SELECT d.body, d.position, d.length, d.device_rank FROM (
                                    SELECT e.body, e.position, octet_length(e.body) AS length,
                                        row_number() OVER (PARTITION BY e.device ORDER BY octet_length(e.body), e.position) AS device_rank
                                    FROM events e WHERE e.tenant_id = \(tenant) AND e.writer = w.writer AND e.counter = w.counter) d
                                ORDER BY d.device_rank, d.length, d.position LIMIT \(perIdentity + 1)) b) r) s
                    ORDER BY rank, length, position
                    """, logger: logger)
                var found: [(Int64, ByteBuffer?)] = []
                for try await row in rows.decode((Int64, ByteBuffer?).self) { found.append(row) }
                return found
            }
            for (ordinal, body) in rows {
                guard let body else {
                    if ordinal >= 1, ordinal <= whole.count { whole[Int(ordinal) - 1] = false }
                    continue
                }
                bodies.append(Array(buffer: body))
            }
        }
        let head = UInt64(max(0, storedHead))
        let headChain = Array(buffer: chain)
        let encoded = RelayRange.encode(
            source: Array(buffer: relay), epoch: Array(buffer: epoch), after: head, upTo: head, head: head, afterChain: headChain,
            upToChain: headChain, keys: try await keyRecords(tenant: tenant, namedBy: bodies), events: bodies)
        return (encoded, bodies.count, whole)
    }
}
