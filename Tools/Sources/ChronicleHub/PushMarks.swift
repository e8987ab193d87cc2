@_spi(Wire) import ChronicleFormat
import NIOCore
import PostgresNIO

/// What one commit moves of its devices' push marks (`push_marks`, docs/FORMAT.md 13): for each
/// (device, pushing log, epoch, filter), the sequence up to which the tenant holds everything
/// the device pushed of that log with that filter, without a gap, and the log's chain hash there.
///
/// A push from the start of the log (`after` 0) sets the mark to where it ends. Any other push
/// moves it only when it starts at or before it: one that starts past it (the device pushed from
/// a checkpoint the hub no longer reaches, as after a restore or with an `info` read before one)
/// leaves it, and a first mark that does not start at 0 is 0, so the device's next `info` shows
/// the gap and the device pushes it again. A database restored from a backup brings back the
/// marks of that moment: each device then pushes again only what came after them.
struct PushMarks {
    /// The most marks kept per device, the most recently moved (a device syncs a handful of
    /// stores and two filters; a token holder naming many logs only evicts its own marks). A
    /// log's marks of an older epoch go first.
    static let maxPerDevice = WireInfo.maxPushMarks

    private struct Key: Hashable {
        var device: String
        var source: [UInt8]
        var epoch: [UInt8]
        var filter: String
    }

    /// One push, or the pushes of one key in a commit folded into one.
    private struct Move {
        var after: UInt64
        var upTo: UInt64
        var chain: [UInt8]
    }

    private var moves: [Key: Move] = [:]
    private var order: [Key] = []

    /// Adds an accepted push of `range`, exported with `filter`, by `device`.
    mutating func add(device: String, range: RelayRange, filter: RangeFilter) {
        let key = Key(device: device, source: range.source, epoch: range.epoch, filter: WireFormat.text(filter))
        let move = Move(after: range.after, upTo: range.upTo, chain: range.upToChain)
        guard let folded = moves[key] else {
            moves[key] = move
            order.append(key)
            return
        }
        // Pushes of one device and log in one commit (concurrent syncs of one store), folded
        // without ever claiming more than the statement applying them one after the other would
        // (a push the fold cannot join is left out: the mark lags, and the device pushes again).
        if move.after == 0 {
            moves[key] = move
        } else if move.after <= folded.upTo, move.upTo > folded.upTo {
            moves[key] = Move(after: folded.after, upTo: move.upTo, chain: move.chain)
        }
    }

    /// Moves the marks in the commit's transaction (one statement; a second when a device
    /// gained a mark, to keep its newest ``maxPerDevice``).
    func write(tenant: Int64, on connection: PostgresConnection, logger: Logger) async throws {
        guard !order.isEmpty else { return }
        let devices = order.map(\.device)
        let sources = order.map { ByteBuffer(bytes: $0.source) }
        let epochs = order.map { ByteBuffer(bytes: $0.epoch) }
        let filters = order.map(\.filter)
        let folded = order.compactMap { moves[$0] }
        // Sequences are u64 on the wire; PostgreSQL's bigint holds them up to 2^63 - 1, as positions.
        let afters = folded.map { Int64(clamping: $0.after) }
        let upTos = folded.map { Int64(clamping: $0.upTo) }
        let chains = folded.map { ByteBuffer(bytes: $0.chain) }
        var inserted = false
        for try await fresh in try await connection.query(
            """
            INSERT INTO push_marks AS m (tenant_id, device, source, epoch, filter, up_to, up_to_chain, pushed_after, pushed_up_to, pushed_chain)
            SELECT \(tenant), d, s, e, f, CASE WHEN a = 0 THEN u ELSE 0 END, CASE WHEN a = 0 THEN c END, a, u, c
            FROM unnest(
                \(devices)::text[], \(sources)::bytea[], \(epochs)::bytea[], \(filters)::text[], \(afters)::bigint[], \(upTos)::bigint[],
                \(chains)::bytea[]) AS x(d, s, e, f, a, u, c)
            ON CONFLICT (tenant_id, device, source, epoch, filter) DO UPDATE SET
                up_to = CASE WHEN EXCLUDED.pushed_after = 0 OR (EXCLUDED.pushed_after <= m.up_to AND EXCLUDED.pushed_up_to > m.up_to)
                    THEN EXCLUDED.pushed_up_to ELSE m.up_to END,
                up_to_chain = CASE WHEN EXCLUDED.pushed_after = 0 OR (EXCLUDED.pushed_after <= m.up_to AND EXCLUDED.pushed_up_to > m.up_to)
                    THEN EXCLUDED.pushed_chain ELSE m.up_to_chain END,
                pushed_after = EXCLUDED.pushed_after, pushed_up_to = EXCLUDED.pushed_up_to, pushed_chain = EXCLUDED.pushed_chain,
                moved = nextval('push_mark_moves')
            RETURNING xmax = 0
            """, logger: logger
        ).decode(Bool.self) where fresh { inserted = true }
        guard inserted else { return }
        try await connection.query(
            """
            DELETE FROM push_marks p USING (
                SELECT device, source, epoch, filter,
                    row_number() OVER (PARTITION BY device ORDER BY moved DESC) AS newest,
                    row_number() OVER (PARTITION BY device, source, filter ORDER BY moved DESC) AS newest_of_log
                FROM push_marks WHERE tenant_id = \(tenant) AND device = ANY(\(Array(Set(devices)))::text[])
            ) o
            WHERE p.tenant_id = \(tenant) AND p.device = o.device AND p.source = o.source AND p.epoch = o.epoch
                AND p.filter = o.filter AND (o.newest > \(Self.maxPerDevice) OR o.newest_of_log > 1)
            """, logger: logger)
    }
}
