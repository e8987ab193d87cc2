@testable import Chronicle
@testable import ChronicleHub
import ChronicleHTTP
import PostgresNIO
import Foundation
import NIOHTTP1
import Testing

extension Keys {
    static let hubNote = Key<String>("hub.note", default: "")
    static let hubSecret = SecretKey<String?>("hub.secret", sync: .automaticSmall)
}

/// Passphrase groups at the cheapest Argon2id cost (never below MODERATE outside tests).
func groupConfiguration(_ passphrase: String) -> Store.Configuration {
    var configuration = Store.Configuration(keySource: .passphrase(passphrase), keyDerivationCost: .minimumForTesting)
    configuration.travelKeyCost = .minimumForTesting
    return configuration
}

/// The hub against a real PostgreSQL server (scripts/with-postgres.sh starts one for the suite).
/// Serialized: one test restarts the server.
@Suite(.serialized, .enabled(if: hasTestDatabase, "needs CHRONICLE_TEST_DATABASE: run scripts/test.sh"))
struct HubTests {
    /// Devices of one tenant on different nodes converge, sealed values stay sealed end to end.
    @Test func devicesOnDifferentNodesConverge() async throws {
        try await withHub { hub in
            let tenant = try await hub.tenant()
            let (laptop, phone) = (try await hub.token(tenant, "laptop"), try await hub.token(tenant, "phone"))
            try await withStores(2, configuration: groupConfiguration("family secret")) { stores in
                let (a, b) = (stores[0], stores[1])
                try await a.set("from the laptop", for: .hubNote)
                try await a.set("s3cret-value", for: .hubSecret)
                try await Replicator(store: a, peers: [hub.peer(node: 0, token: laptop)]).sync()
                try await Replicator(store: b, peers: [hub.peer(node: 1, token: phone)]).sync()
                #expect(b[.hubNote] == "from the laptop")
                #expect(try b.value(for: .hubSecret) == "s3cret-value")
                try await b.set("from the phone", for: .hubNote)
                try await Replicator(store: b, peers: [hub.peer(node: 1, token: phone)]).sync()
                try await Replicator(store: a, peers: [hub.peer(node: 0, token: laptop)]).sync()
                #expect(a[.hubNote] == "from the phone")
                // The operator's copy holds the sealed value sealed.
                let id = try await hub.tenantID(tenant)
                let rows = try await hub.admin.client.query("SELECT body FROM events WHERE tenant_id = \(id)")
                var bodies = 0
                for try await body in rows.decode(Data.self) {
                    bodies += 1
                    #expect(body.range(of: Data("s3cret-value".utf8)) == nil)
                }
                #expect(bodies == 3)
                let summary = try await hub.admin.tenants().first { $0.name == tenant }
                #expect(summary?.devices == 2)
                #expect(summary?.events == 3)
            }
        }
    }

    /// A token of tenant A neither reads nor writes tenant B, whatever it sends; unknown and
    /// revoked tokens get 401 on every node at once.
    @Test func tenantsAreIsolatedAndRevocationIsImmediate() async throws {
        try await withHub { hub in
            let (first, second) = (try await hub.tenant(), try await hub.tenant())
            let alice = try await hub.token(first, "alice-phone")
            let bob = try await hub.token(second, "bob-phone")
            try await withStores(2) { stores in
                try await stores[0].set("alice's", for: .hubNote)
                try await Replicator(store: stores[0], peers: [hub.peer(node: 0, token: alice)]).sync()
                try await Replicator(store: stores[1], peers: [hub.peer(node: 1, token: bob)]).sync()
                #expect(stores[1][.hubNote] == "", "bob's tenant sees nothing of alice's")
                let pulled = try await rawRequest(hub.urls[1].appendingPathComponent("v1/range").appending(queryItems: [.init(name: "after", value: "0")]), token: bob)
                #expect(pulled.status == 200)
                #expect(try RelayRange(decoding: Array(pulled.body)).events.isEmpty)
                let infoA = try await rawRequest(hub.urls[0].appendingPathComponent("v1/info"), token: alice)
                let infoB = try await rawRequest(hub.urls[0].appendingPathComponent("v1/info"), token: bob)
                #expect(infoA.body != infoB.body)
            }
            for url in hub.urls {
                #expect(try await rawRequest(url.appendingPathComponent("v1/info"), token: nil).status == 401)
                #expect(try await rawRequest(url.appendingPathComponent("v1/info"), token: "chr_forged").status == 401)
                #expect(try await rawRequest(url.appendingPathComponent("v1/info"), token: alice).status == 200)
            }
            #expect(try await hub.admin.revokeToken(tenant: first, device: "alice-phone"))
            for url in hub.urls {
                #expect(try await rawRequest(url.appendingPathComponent("v1/info"), token: alice).status == 401)
            }
            #expect(try await !hub.admin.revokeToken(tenant: second, device: "alice-phone"), "a device of another tenant")
            #expect(try await rawRequest(hub.urls[0].appendingPathComponent("healthz"), token: nil).status == 200)
            let metrics = try await rawRequest(hub.urls[0].appendingPathComponent("metrics"), token: nil)
            #expect(String(decoding: metrics.body, as: UTF8.self).contains("chronicle_hub_requests_total"))
        }
    }

    /// Two devices pushing the same identities at once through two nodes: stored once.
    @Test func sameIdentitiesPushedAtOnceThroughTwoNodesAreStoredOnce() async throws {
        try await withHub { hub in
            let tenant = try await hub.tenant()
            let tokens = [try await hub.token(tenant, "one"), try await hub.token(tenant, "two")]
            try await withStores(1) { stores in
                for i in 0..<50 { try await stores[0].set("value \(i)", for: Key<String>("hub.k\(i % 10)", default: "")) }
                let range = try stores[0].exportRange(after: 0)
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for attempt in 0..<8 {
                        group.addTask {
                            let response = try await rawRequest(
                                hub.urls[attempt % 2].appendingPathComponent("v1/range"), method: .POST, token: tokens[attempt % 2], body: range)
                            return response.status
                        }
                    }
                    for try await status in group { #expect(status == 200) }
                }
                let id = try await hub.tenantID(tenant)
                let rows = try await hub.admin.client.query("SELECT count(*), max(position) FROM events WHERE tenant_id = \(id)")
                for try await (count, head) in rows.decode((Int64, Int64).self) {
                    #expect(count == 50)
                    #expect(head == 50, "positions are dense")
                }
            }
        }
    }

    /// Pullers that follow the log while many devices push at once, through both nodes, never
    /// miss an event: positions are numbered inside the appending transaction.
    @Test func pullersNeverMissAnEventOfConcurrentPushes() async throws {
        try await withHub { hub in
            let tenant = try await hub.tenant()
            let devices = 6
            let tokens = try await (0..<devices).asyncMap { try await hub.token(tenant, "device-\($0)") }
            let reader = try await hub.token(tenant, "reader")
            try await withStores(devices) { stores in
                for (index, store) in stores.enumerated() {
                    for i in 0..<40 { try await store.set("\(index).\(i)", for: Key<String>("hub.d\(index).k\(i % 5)", default: "")) }
                }
                let ranges = try stores.map { try $0.exportRange(after: 0) }
                let pushes = Task {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for (index, range) in ranges.enumerated() {
                            group.addTask {
                                // In small pieces: many interleaved transactions.
                                let full = try RelayRange(decoding: Array(range))
                                for start in stride(from: 0, to: full.events.count, by: 7) {
                                    let piece = RelayRange.encode(
                                        source: full.source, epoch: [UInt8](repeating: 1, count: 16), after: 0, upTo: 0, head: 0,
                                        afterChain: RelayRange.emptyChain, upToChain: RelayRange.emptyChain, keys: [],
                                        events: full.events[start..<min(start + 7, full.events.count)].map(\.bytes))
                                    let response = try await rawRequest(
                                        hub.urls[(index + start) % 2].appendingPathComponent("v1/range"), method: .POST, token: tokens[index], body: Data(piece))
                                    #expect(response.status == 200)
                                }
                            }
                        }
                        try await group.waitForAll()
                    }
                }
                var checkpoint: UInt64 = 0
                var seen = Set<[UInt8]>()
                var pushed = false
                while true {
                    let url = hub.urls[Int(checkpoint % 2)].appendingPathComponent("v1/range")
                        .appending(queryItems: [.init(name: "after", value: String(checkpoint)), .init(name: "max", value: "5")])
                    let response = try await rawRequest(url, token: reader)
                    let range = try RelayRange(decoding: Array(response.body))
                    for event in range.events { #expect(seen.insert(event.bytes).inserted, "an event pulled twice") }
                    checkpoint = range.upTo
                    if pushed, range.events.isEmpty { break }
                    if !pushed, pushes.isCancelled == false, await isDone(pushes) { pushed = true }
                }
                try await pushes.value
                #expect(seen.count == devices * 40)
            }
        }
    }

    /// A tenant over its quota gets a clear refusal and nothing of the push; other tenants are unaffected.
    @Test func quotasRefuseClearlyAndOnlyTheirTenant() async throws {
        try await withHub { hub in
            let small = try await hub.tenant(maxEvents: 5)
            let other = try await hub.tenant()
            let (full, fine) = (try await hub.token(small, "d"), try await hub.token(other, "d"))
            try await withStores(1) { stores in
                for i in 0..<8 { try await stores[0].set("v\(i)", for: Key<String>("hub.q\(i)", default: "")) }
                let range = try stores[0].exportRange(after: 0)
                let refused = try await rawRequest(hub.urls[0].appendingPathComponent("v1/range"), method: .POST, token: full, body: range)
                #expect(refused.status == 507)
                #expect(String(decoding: refused.body, as: UTF8.self).contains("quota of 5 events"))
                #expect(try await hub.admin.tenants().first { $0.name == small }?.events == 0, "nothing of the push")
                let accepted = try await rawRequest(hub.urls[1].appendingPathComponent("v1/range"), method: .POST, token: fine, body: range)
                #expect(accepted.status == 200)
                let garbage = try await rawRequest(hub.urls[1].appendingPathComponent("v1/range"), method: .POST, token: fine, body: Data("nonsense".utf8))
                #expect(garbage.status == 400)
                let sync = Replicator(store: stores[0], peers: [hub.peer(node: 0, token: full)])
                await #expect(throws: ChronicleError.self) { try await sync.sync() }
            }
        }
    }

    /// Automatic mode through two nodes: a change reaches the other device by the hub's
    /// long-poll, not by polling (the pull interval is an hour here).
    @Test func automaticModeDeliversThroughTwoNodesWithoutPolling() async throws {
        try await withHub { hub in
            let tenant = try await hub.tenant()
            let (first, second) = (try await hub.token(tenant, "first"), try await hub.token(tenant, "second"))
            try await withStores(2) { stores in
                var configuration = Replicator.Configuration()
                configuration.pullInterval = .seconds(3600)
                let a = Replicator(store: stores[0], peers: [hub.peer(node: 0, token: first)], configuration: configuration)
                let b = Replicator(store: stores[1], peers: [hub.peer(node: 1, token: second)], configuration: configuration)
                await a.start()
                await b.start()
                let updates = stores[1].updates(of: .hubNote)
                try await Task.sleep(for: .milliseconds(500))  // both watching (or the first round pulls it anyway)
                try await stores[0].set("pushed by a", for: .hubNote)
                let arrived = await withTaskGroup(of: Bool.self) { group in
                    group.addTask { for await value in updates where value == "pushed by a" { return true }; return false }
                    group.addTask { try? await Task.sleep(for: .seconds(60)); return false }  // a guard, not a measurement
                    let first = await group.next() ?? false
                    group.cancelAll()
                    return first
                }
                #expect(arrived, "the change did not arrive (the pull interval is an hour: only the long-poll brings it)")
                #expect(stores[1][.hubNote] == "pushed by a")
                await a.stop()
                await b.stop()
            }
        }
    }

    /// A long-poll on one node wakes when another device pushes through the other node
    /// (LISTEN/NOTIFY), and carries the new event.
    @Test func longPollWakesAcrossNodes() async throws {
        try await withHub { hub in
            let tenant = try await hub.tenant()
            let (watcher, writer) = (try await hub.token(tenant, "watcher"), try await hub.token(tenant, "writer"))
            let id = try await hub.tenantID(tenant)
            let before = hub.nodes[0].notifier.generation(id)
            let poll = Task {
                try await rawRequest(
                    hub.urls[0].appendingPathComponent("v1/range").appending(queryItems: [.init(name: "after", value: "0"), .init(name: "wait", value: "30")]),
                    token: watcher)
            }
            try await Task.sleep(for: .milliseconds(300))
            try await withStores(1) { stores in
                try await stores[0].set("wake up", for: .hubNote)
                try await Replicator(store: stores[0], peers: [hub.peer(node: 1, token: writer)]).sync()
            }
            let response = try await poll.value
            #expect(response.status == 200)
            #expect(try RelayRange(decoding: Array(response.body)).events.count == 1)
            #expect(hub.nodes[0].notifier.generation(id) > before, "node 0 heard node 1's append")
        }
    }
}

func isDone<T>(_ task: Task<T, any Error>) async -> Bool {
    await withTaskGroup(of: Bool.self) { group in
        group.addTask { _ = try? await task.value; return true }
        group.addTask { try? await Task.sleep(for: .milliseconds(1)); return false }
        let first = await group.next() ?? false
        group.cancelAll()
        return first
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
