import Chronicle
import ChronicleHTTP
import ChronicleHub
import Foundation
import PostgresNIO

// `--only-hub-big [--hub-big-tenants N] [--hub-big-events E]`: a device's sync on a big hub
// against the same on an empty one. Each round a new tenant's device pushes 200 events, a new
// device of it pulls them (its first pull), and the first syncs again with nothing new (an idle
// sync); three rounds on the empty hub (after three that warm it up), then N tenants of E events each (a device each) are
// loaded with SQL (10,000 × 100 by default: a minute; 100,000 × 100, 10⁷ events, takes about
// ten), and three rounds again. Reported as medians and their ratio, big ÷ empty.

@MainActor func hubBigBenchmark() async {
    func option(_ name: String, _ fallback: Int) -> Int {
        arguments.firstIndex(of: name).flatMap { arguments.indices.contains($0 + 1) ? Int(arguments[$0 + 1]) : nil } ?? fallback
    }
    let (tenants, events) = smoke ? (100, 10) : (option("--hub-big-tenants", 10_000), option("--hub-big-events", 100))
    let servers = LoopbackServers()
    defer { servers.stop() }
    await withBenchDatabase("hub big") { url, admin, client in
        let urls = try await servers.start(1) { _, onRunning in
            try await HubNode(database: try HubDatabase(url: url)).run(host: "127.0.0.1", port: 0, onRunning: onRunning)
        }
        _ = try await syncRounds(admin: admin, url: urls[0], label: "warm-up")  // connections, prepared statements
        let empty = try await syncRounds(admin: admin, url: urls[0], label: "empty")
        let clock = ContinuousClock()
        let start = clock.now
        try await load(client, tenants: tenants, events: events)
        print(String(format: "loaded %d tenants of %d events in %.0f s (vacuumed and analyzed)", tenants, events, nanoseconds(clock.now - start) / 1e9))
        let big = try await syncRounds(admin: admin, url: urls[0], label: "big")
        let what = "\(tenants) tenants, \(tenants * events) events"
        for (index, name) in ["push of 200 events", "first pull of 200 events", "idle sync"].enumerated() {
            report.single(
                "hub \(name) on a hub of \(what)", String(format: "%.1f ms", big[index] * 1_000),
                String(format: "empty hub %.1f ms; %.2f× (medians of 3 rounds)", empty[index] * 1_000, big[index] / empty[index]))
        }
    }
}

/// Three rounds of (push, first pull, idle sync) by new devices of a new tenant; the medians, in seconds.
@MainActor private func syncRounds(admin: HubDatabase, url: URL, label: String) async throws -> [Double] {
    let clock = ContinuousClock()
    var samples: [[Double]] = [[], [], []]
    for round in 0..<3 {
        let name = "big-\(label)-\(round)-\(UUID().uuidString.prefix(6).lowercased())"
        try await admin.addTenant(name)
        let (first, second) = (try await admin.issueToken(tenant: name, device: "one"), try await admin.issueToken(tenant: name, device: "two"))
        let writer = try Store(directory: scratch.directory("\(name)-one"))
        try writer.write { batch in for index in 0..<200 { batch[Key<Int>("bench.big.k\(index)", default: 0, sync: .manual)] = index } }
        let reader = try Store(directory: scratch.directory("\(name)-two"))
        for (index, (store, token)) in [(writer, first), (reader, second), (writer, first)].enumerated() {
            let start = clock.now
            _ = try await Replicator(store: store, peers: [.http(url, token: token)]).sync()
            samples[index].append(nanoseconds(clock.now - start) / 1e9)
        }
    }
    return samples.map { $0.sorted()[1] }
}

/// `tenants` tenants of `events` events each (200-byte bodies over 20 keys), a device each.
private func load(_ client: PostgresClient, tenants: Int, events: Int) async throws {
    let batch = 1_000
    for first in stride(from: 0, to: tenants, by: batch) {
        let last = Int64(min(tenants, first + batch) - 1)
        let (from, count) = (Int64(first), Int64(events))
        try await client.query(
            """
            WITH made AS (
                INSERT INTO tenants (name, relay_id, epoch, head, chain, event_count, byte_count)
                SELECT 'loaded-' || g, gen_random_uuid()::text::bytea, gen_random_uuid()::text::bytea, \(count), sha256(int8send(g)), \(count), \(count) * 200
                FROM generate_series(\(from), \(last)) g
                RETURNING id
            ), devices AS (
                INSERT INTO devices (tenant_id, name, token_hash) SELECT id, 'phone', sha256(int8send(id)) FROM made
            )
            INSERT INTO events (tenant_id, position, writer, counter, policy, payload_size, body, chain, key, hlc, device)
            SELECT m.id, p, sha256(int8send(m.id))::bytea, p, 1, 200, convert_to(repeat('x', 168), 'UTF8') || sha256(int8send(m.id * 1000000 + p)),
                sha256(int8send(p)), convert_to('bench.big.' || (p % 20), 'UTF8'), p, 'phone'
            FROM made m, generate_series(1, \(count)) p
            """)
    }
    // As a hub that has run a while leaves it: vacuumed (the visibility map lets index-only
    // scans skip the heap) and analyzed, not busy with autovacuum's first pass over the load.
    try await client.query("VACUUM (ANALYZE)")
}
