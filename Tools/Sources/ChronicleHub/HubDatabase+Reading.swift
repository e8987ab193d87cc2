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
    /// many bytes of event bodies it read from the database.
    ///
    /// The token check, the tenant's head and chain, the chain at the start and the events after
    /// it are one statement, so one snapshot, in one round trip (the events as arrays in one row:
    /// at most 4,096 positions, and only while the bodies before each add up to less than the
    /// range's ~1 MiB, so a row never holds more than that and one event). The
    /// wrapped keys the events name are a second statement: they committed with or before
    /// the events that name them, so a later snapshot holds them too (unless the operator
    /// dropped them in between, which is what dropping them means).
    func range(
        device: HubDevice, after: UInt64, filter: RangeFilter, excluding writer: [UInt8]?, maxEvents: Int
    ) async throws -> (bytes: [UInt8], events: Int, upTo: UInt64, fetchedBytes: Int) {
        let tenant = device.tenant
        let hash = ByteBuffer(bytes: device.tokenHash)
        // Any `after` past the head is answered from the head: Int64.max is past every head.
        let asked = Int64(clamping: after)
        let rows = try await client.query(
            """
            SELECT t.relay_id, t.epoch, t.head, t.chain, a.chain,
                e.positions, e.writers, e.policies, e.sizes, e.bodies, e.chains
            FROM tenants t
            JOIN devices d ON d.tenant_id = t.id AND d.token_hash = \(hash)
            LEFT JOIN events a ON a.tenant_id = t.id AND a.position = least(\(asked), t.head)
            LEFT JOIN LATERAL (
                SELECT array_agg(position ORDER BY position) AS positions, array_agg(writer ORDER BY position) AS writers,
                    array_agg(policy ORDER BY position) AS policies, array_agg(payload_size ORDER BY position) AS sizes,
                    array_agg(body ORDER BY position) AS bodies, array_agg(chain ORDER BY position) AS chains
                FROM (
                    SELECT position, writer, policy, payload_size, body, chain,
                        sum(octet_length(body)) OVER (ORDER BY position) - octet_length(body) AS before
                    FROM events
                    WHERE tenant_id = t.id AND position > least(\(asked), t.head) AND position <= t.head
                    ORDER BY position LIMIT \(Self.scanLimit)) s
                WHERE s.before < \(Int64(Self.pullBytes))
            ) e ON true
            WHERE t.id = \(tenant)
            """, logger: logger)
        typealias Row = (
            ByteBuffer, ByteBuffer, Int64, ByteBuffer, ByteBuffer?, [Int64]?, [ByteBuffer]?, [Int16]?, [Int32]?, [ByteBuffer]?, [ByteBuffer]?
        )
        var found: Row?
        for try await row in rows.decode(Row.self) { found = row }
        guard let (relay, epoch, storedHead, headChain, chainAtStart, positions, writers, policies, sizes, events, chains) = found else {
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
        var bodies: [[UInt8]] = []
        var bytes = 0
        if let positions, let writers, let policies, let sizes, let events, let chains,
            [writers.count, policies.count, sizes.count, events.count, chains.count].allSatisfy({ $0 == positions.count })
        {
            for index in positions.indices {
                if bodies.count >= maxEvents || bytes >= Self.pullBytes { break }
                upTo = UInt64(max(0, positions[index]))
                upToChain = Array(buffer: chains[index])
                let policy = policies[index]
                guard RelayRange.admits(filter, policy: policy < 0 ? nil : UInt8(clamping: policy), payloadSize: Int(sizes[index])),
                    writer.map({ Array(buffer: writers[index]) != $0 }) ?? true
                else { continue }
                bodies.append(Array(buffer: events[index]))
                bytes += events[index].readableBytes
            }
        }
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
        return (encoded, bodies.count, upTo, events?.reduce(0) { $0 + $1.readableBytes } ?? 0)
    }

    /// Records that `device` pulled up to `position` (the operator's view of each device's progress).
    func recordPull(tenant: Int64, device: String, position: UInt64) async throws {
        try await client.query(
            "UPDATE devices SET last_seen = now(), pulled = GREATEST(pulled, \(Int64(position))) WHERE tenant_id = \(tenant) AND name = \(device)",
            logger: logger)
    }
}
