import ChronicleHub
import Foundation
import Logging
import PostgresNIO
import Synchronization

// `--only-hub-trim`: what a trim costs on a big tenant. A tenant of 200,000 events (2,000 keys ×
// 100 revisions, the default retention) and one of 1,000,000 (10,000 keys × 100) are loaded with
// SQL; then a device's push of 256 events is appended (to one key, and to 256 keys) and trimmed,
// and the tenant's retention is lowered to 50. Each is timed per statement, beside the statement
// trims ran before they were incremental (the whole tenant ranked), run read-only on the same rows.

/// The statement a trim ran before trims were incremental: every (key, device) of the tenant
/// ranked. Read-only here (it counts what it would delete).
private let wholeTenantRanking = """
    WITH pairs AS (
        SELECT position, key, hlc, writer, counter, pusher
        FROM events, unnest(array_prepend(device, also_pushed_by)) AS pusher
        WHERE tenant_id = $1 AND key IS NOT NULL
    ), ranked AS (
        SELECT position,
            row_number() OVER (PARTITION BY key, pusher ORDER BY position DESC) AS newest,
            rank() OVER (PARTITION BY key, pusher ORDER BY hlc DESC, writer DESC, counter DESC) AS greatest
        FROM pairs
    )
    SELECT count(*) FROM (
        SELECT position FROM ranked GROUP BY position HAVING bool_and(newest > 100 AND greatest > 1) LIMIT 4096) d
    """

/// A client of the benchmark's database (`postgres://USER@HOST:PORT/DATABASE`, no TLS).
func benchClient(_ url: String) throws -> PostgresClient {
    guard let parts = URLComponents(string: url), let host = parts.host, let user = parts.user else {
        throw BenchFailure("not a PostgreSQL URL: \(url)")
    }
    let configuration = PostgresClient.Configuration(
        host: host, port: parts.port ?? 5432, username: user, password: parts.password,
        database: String(parts.path.dropFirst()), tls: .disable)
    return PostgresClient(configuration: configuration)
}

/// A failure of the benchmark's own setup.
struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Seconds `body` took.
@MainActor private func seconds(_ body: () async throws -> Void) async rethrows -> Double {
    let start = ContinuousClock.now
    try await body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

/// The longest gap between progress reports of a trim: its longest step.
private final class StepClock: Sendable {
    private let state = Mutex<(last: ContinuousClock.Instant, longest: Duration)>((ContinuousClock.now, .zero))
    func start() { state.withLock { $0 = (ContinuousClock.now, .zero) } }
    func step() {
        state.withLock { state in
            let now = ContinuousClock.now
            state.longest = max(state.longest, now - state.last)
            state.last = now
        }
    }
    var longest: Double {
        let value = state.withLock { $0.longest }
        return Double(value.components.seconds) + Double(value.components.attoseconds) / 1e18
    }
}

@MainActor func hubTrimBenchmark() async {
    await withBenchDatabase("hub trim") { url, admin, client in
        let sizes = smoke ? [(events: 2_000, keys: 20)] : [(events: 200_000, keys: 2_000), (events: 1_000_000, keys: 10_000)]
        for size in sizes { try await trimRound(admin: admin, client: client, events: size.events, keys: size.keys) }
    }
}

/// Runs `body` with the benchmark's database (its URL, migrated, through the hub's client and
/// a plain one); a failure is printed as the benchmark's, `what`.
@MainActor func withBenchDatabase(_ what: String, _ body: (String, HubDatabase, PostgresClient) async throws -> Void) async {
    guard let hubDatabaseURL else {
        print("\(what) benchmark skipped: set CHRONICLE_BENCH_DATABASE (or run it under scripts/with-postgres.sh)")
        return
    }
    do {
        let admin = try HubDatabase(url: hubDatabaseURL)
        let client = try benchClient(hubDatabaseURL)
        let tasks = [Task { await admin.run() }, Task { await client.run() }]
        defer { for task in tasks { task.cancel() } }
        try await admin.migrate()
        try await body(hubDatabaseURL, admin, client)
    } catch {
        print("\(what) benchmark failed: \(error)")
    }
}

/// One tenant of `events` rows over `keys` keys: the whole-tenant ranking, then the trims.
@MainActor private func trimRound(admin: HubDatabase, client: PostgresClient, events: Int, keys: Int) async throws {
    let name = "trim-\(UUID().uuidString.prefix(8).lowercased())"
    try await admin.addTenant(name, maxEvents: nil, maxBytes: nil)
    var id: Int64 = 0
    for try await found in try await client.query("SELECT id FROM tenants WHERE name = \(name)").decode(Int64.self) { id = found }
    let load = try await seconds {
        try await insert(client, tenant: id, from: 1, count: events, keys: keys)
        try await client.query("UPDATE tenants SET head = \(Int64(events)), event_count = \(Int64(events)) WHERE id = \(id)")
        try await client.query("ANALYZE events")
    }
    let label = "\(events / 1_000)K-event tenant"
    print(String(format: "loaded the %@ in %.0f s", label, load))
    let whole = try await seconds {
        for try await _ in try await client.query(PostgresQuery(unsafeSQL: wholeTenantRanking, binds: bindings(id))) {}
    }
    let clock = StepClock()
    var position = events
    for (what, touched) in [("1 key", 1), ("256 keys", 256)] {
        try await insert(client, tenant: id, from: position + 1, count: 256, keys: touched, mark: true)
        position += 256
        clock.start()
        var trim = HubTrim()
        let took = try await seconds { trim = try await admin.trim(tenant: id) { _ in clock.step() } }
        report.single(
            "hub trim after a push of 256 events to \(what), \(label)", String(format: "%.0f ms", took * 1_000),
            String(format: "longest statement %.0f ms (%@); the whole-tenant ranking: %.0f ms", clock.longest * 1_000, trim.description, whole * 1_000))
    }
    clock.start()
    var lowered = HubTrim()
    let took = try await seconds { lowered = try await admin.setRetention(tenant: name, revisions: 50) { _ in clock.step() } }
    report.single(
        "hub retention 100 → 50, \(label)", String(format: "%.1f s", took),
        String(format: "longest step %.0f ms (%@)", clock.longest * 1_000, lowered.description))
}

private func bindings(_ tenant: Int64) -> PostgresBindings {
    var bindings = PostgresBindings()
    bindings.append(tenant)
    return bindings
}

/// Appends `count` rows at positions `from`… over `keys` keys (one device), as a push stores
/// them; `mark`: marks their keys for the next trim, as a push does.
private func insert(_ client: PostgresClient, tenant: Int64, from: Int, count: Int, keys: Int, mark: Bool = false) async throws {
    let (first, last, keyCount) = (Int64(from), Int64(from + count - 1), Int64(keys))
    try await client.query(
        """
        INSERT INTO events (tenant_id, position, writer, counter, policy, payload_size, body, chain, key, hlc, device)
        SELECT \(tenant), g, decode('00112233445566778899aabbccddeeff', 'hex'), g, 1, 32, sha256(int8send(g)), sha256(int8send(g)),
            convert_to('bench.key.' || (g % \(keyCount)), 'UTF8'), g, 'phone'
        FROM generate_series(\(first), \(last)) g
        """)
    guard mark else { return }
    try await client.query(
        """
        INSERT INTO trim_pending (tenant_id, key)
        SELECT DISTINCT \(tenant), convert_to('bench.key.' || (g % \(keyCount)), 'UTF8') FROM generate_series(\(first), \(last)) g
        ON CONFLICT (tenant_id, key) DO UPDATE SET marks = nextval('trim_marks')
        """)
    try await client.query("UPDATE tenants SET head = \(last), event_count = event_count + \(Int64(count)) WHERE id = \(tenant)")
}
