@_spi(Wire) import ChronicleFormat
import NIOCore
import PostgresNIO

/// What one commit moves of its devices' push marks (`push_marks`, docs/FORMAT.md 13): for each
/// (device, pushing log, epoch, filter), the sequence up to which the tenant holds everything
/// the device pushed of that log with that filter, without a gap.
///
/// A mark moves only with a push that starts at or before it: a push that starts past it (the
/// device pushed from a checkpoint the hub no longer reaches, as after a restore) leaves it where
/// it is, so the device's next `info` shows the gap and the device pushes it again. A device's
/// first mark of a log starts where its first push ends (what it pushed before marks existed is
/// trusted, as its checkpoint was). A database restored from a backup brings back the marks of
/// that moment: each device then pushes again only what came after them.
struct PushMarks {
    /// The most marks kept per device: the most recently moved stay (a device syncs a handful of
    /// stores and two filters; a token holder naming many logs only evicts its own marks).
    static let maxPerDevice = WireInfo.maxPushMarks

    private struct Key: Hashable {
        var device: String
        var source: [UInt8]
        var epoch: [UInt8]
        var filter: String
    }

    /// Per mark, in the order first pushed: the first push's start and how far the pushes that
    /// followed it without a gap reached.
    private var ranges: [Key: (after: UInt64, upTo: UInt64)] = [:]
    private var order: [Key] = []

    /// Adds an accepted push of `range`, exported with `filter`, by `device`.
    mutating func add(device: String, range: RelayRange, filter: RangeFilter) {
        let key = Key(device: device, source: range.source, epoch: range.epoch, filter: WireFormat.text(filter))
        guard let folded = ranges[key] else {
            ranges[key] = (range.after, range.upTo)
            order.append(key)
            return
        }
        // Pushes of one device and log in one commit (concurrent syncs of one store): one that
        // starts past what the earlier ones reached leaves a gap, and moves nothing.
        if range.after <= folded.upTo { ranges[key] = (folded.after, max(folded.upTo, range.upTo)) }
    }

    /// Moves the marks in the commit's transaction (one statement; a second when a device
    /// gained a mark, to keep its newest ``maxPerDevice``).
    func write(tenant: Int64, on connection: PostgresConnection, logger: Logger) async throws {
        guard !order.isEmpty else { return }
        let devices = order.map(\.device)
        let sources = order.map { ByteBuffer(bytes: $0.source) }
        let epochs = order.map { ByteBuffer(bytes: $0.epoch) }
        let filters = order.map(\.filter)
        // Sequences are u64 on the wire; PostgreSQL's bigint holds them up to 2^63 - 1, as positions.
        let afters = order.map { Int64(clamping: ranges[$0]?.after ?? 0) }
        let upTos = order.map { Int64(clamping: ranges[$0]?.upTo ?? 0) }
        var inserted = false
        for try await fresh in try await connection.query(
            """
            INSERT INTO push_marks AS m (tenant_id, device, source, epoch, filter, up_to, pushed_after)
            SELECT \(tenant), d, s, e, f, u, a
            FROM unnest(\(devices)::text[], \(sources)::bytea[], \(epochs)::bytea[], \(filters)::text[], \(afters)::bigint[], \(upTos)::bigint[])
                AS x(d, s, e, f, a, u)
            ON CONFLICT (tenant_id, device, source, epoch, filter) DO UPDATE SET
                up_to = CASE WHEN EXCLUDED.pushed_after <= m.up_to THEN GREATEST(m.up_to, EXCLUDED.up_to) ELSE m.up_to END,
                pushed_after = EXCLUDED.pushed_after, moved = nextval('push_mark_moves')
            RETURNING xmax = 0
            """, logger: logger
        ).decode(Bool.self) where fresh { inserted = true }
        guard inserted else { return }
        try await connection.query(
            """
            DELETE FROM push_marks p USING (
                SELECT device, source, epoch, filter,
                    row_number() OVER (PARTITION BY device ORDER BY moved DESC) AS newest
                FROM push_marks WHERE tenant_id = \(tenant) AND device = ANY(\(Array(Set(devices)))::text[])
            ) o
            WHERE p.tenant_id = \(tenant) AND p.device = o.device AND p.source = o.source AND p.epoch = o.epoch
                AND p.filter = o.filter AND o.newest > \(Self.maxPerDevice)
            """, logger: logger)
    }
}
