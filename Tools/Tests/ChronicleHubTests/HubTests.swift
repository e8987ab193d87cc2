@_spi(Wire) @testable import Chronicle
@_spi(Wire) @testable import ChronicleFormat
@testable import ChronicleHub
import ChronicleHTTP
import PostgresNIO
import Subprocess
import SystemPackage
import ChronicleTesting
import Foundation
import NIOHTTP1
import Synchronization
import Testing
import ToolsTestSupport

extension Keys {
    static let hubNote = Key<String>("hub.note", default: "", sync: .automaticSmall)
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
            try await withTemporaryStores(2, configuration: groupConfiguration("family secret")) { stores in
                let (a, b) = (stores[0], stores[1])
                try a.set("from the laptop", for: .hubNote)
                try a.set("s3cret-value", for: .hubSecret)
                try await Replicator(store: a, peers: [hub.peer(node: 0, token: laptop)]).sync()
                try await Replicator(store: b, peers: [hub.peer(node: 1, token: phone)]).sync()
                #expect(b[.hubNote] == "from the laptop")
                #expect(try b.value(for: .hubSecret) == "s3cret-value")
                try b.set("from the phone", for: .hubNote)
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
            try await withTemporaryStores(2) { stores in
                try stores[0].set("alice's", for: .hubNote)
                try await Replicator(store: stores[0], peers: [hub.peer(node: 0, token: alice)]).sync()
                try await Replicator(store: stores[1], peers: [hub.peer(node: 1, token: bob)]).sync()
                #expect(stores[1][.hubNote] == "", "bob's tenant sees nothing of alice's")
                let pulled = try await rawRequest(hub.urls[1].appendingPathComponent("v1/range").appending(queryItems: [.init(name: "after", value: "0")]), token: bob)
                #expect(pulled.status == 200)
                #expect(try RelayRange(decoding: Array(pulled.data)).events.isEmpty)
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
            #expect(try await rawRequest(hub.operatorURLs[0].appendingPathComponent("healthz"), token: nil).status == 200)
            let metrics = try await rawRequest(hub.operatorURLs[0].appendingPathComponent("metrics"), token: nil)
            #expect(metrics.body.contains("chronicle_hub_requests_total"))
            // Never on the public port, where anyone who reaches the hub would read them.
            for path in ["healthz", "metrics"] {
                #expect(try await rawRequest(hub.urls[0].appendingPathComponent(path), token: nil).status == 404, "\(path) on the public port")
            }
        }
    }

    /// Two devices pushing the same identities at once through two nodes: stored once.
    @Test func sameIdentitiesPushedAtOnceThroughTwoNodesAreStoredOnce() async throws {
        try await withHub { hub in
            let tenant = try await hub.tenant()
            let tokens = [try await hub.token(tenant, "one"), try await hub.token(tenant, "two")]
            try await withTemporaryStores(1) { stores in
                for i in 0..<50 { try stores[0].set("value \(i)", for: Key<String>("hub.k\(i % 10)", default: "", sync: .automaticSmall)) }
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
            try await withTemporaryStores(devices) { stores in
                for (index, store) in stores.enumerated() {
                    for i in 0..<40 { try store.set("\(index).\(i)", for: Key<String>("hub.d\(index).k\(i % 5)", default: "", sync: .automaticSmall)) }
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
                    let range = try RelayRange(decoding: Array(response.data))
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
            try await withTemporaryStores(1) { stores in
                for i in 0..<8 { try stores[0].set("v\(i)", for: Key<String>("hub.q\(i)", default: "", sync: .automaticSmall)) }
                let range = try stores[0].exportRange(after: 0)
                let refused = try await rawRequest(hub.urls[0].appendingPathComponent("v1/range"), method: .POST, token: full, body: range)
                #expect(refused.status == 507)
                #expect(refused.body.contains("quota of 5 events"))
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
            try await withTemporaryStores(2) { stores in
                var configuration = Replicator.Configuration()
                configuration.pullInterval = .seconds(3600)
                let a = Replicator(store: stores[0], peers: [hub.peer(node: 0, token: first)], configuration: configuration)
                let b = Replicator(store: stores[1], peers: [hub.peer(node: 1, token: second)], configuration: configuration)
                await a.start()
                await b.start()
                let updates = stores[1].updates(of: .hubNote)
                try await Task.sleep(for: .milliseconds(500))  // both watching (or the first round pulls it anyway)
                try stores[0].set("pushed by a", for: .hubNote)
                let arrived = await withTaskGroup(of: Bool.self) { group in
                    group.addTask { for await value in updates where value == "pushed by a" { return true }; return false }
                    group.addTask { try? await Task.sleep(for: hangGuard); return false }  // a guard, not a measurement
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

    /// A node that stops in the middle of a large push: the device's next sync, through the
    /// other node, completes with nothing lost and nothing stored twice.
    @Test func aNodeStoppedMidPushLosesNothingAndDoublesNothing() async throws {
        try await withHub(nodes: 1) { survivor in
            let tenant = try await survivor.tenant()
            let (writer, reader) = (try await survivor.token(tenant, "writer"), try await survivor.token(tenant, "reader"))
            try await withTemporaryStores(2) { stores in
                try stores[0].write { batch in
                    for i in 0..<3_000 { batch[Key<String>("hub.bulk\(i)", default: "", sync: .automaticSmall)] = "value \(i)" }
                }
                // A second node of its own, stopped while the push is in flight.
                let url = try #require(testDatabase)
                let doomed = HubNode(database: try HubDatabase(url: url))
                let port = Watched<Int?>(nil)
                let node = Task { try await doomed.run(host: "127.0.0.1", port: 0) { bound in port.update { $0 = bound } } }
                try #require(await port.wait(until: { $0 != nil }), "the node did not start")
                let doomedURL = URL(string: "http://127.0.0.1:\(port.value ?? 0)")!
                let held = Watched(0)
                doomed.database.appendQueue.onHeld.withLock { $0 = { _, count in held.update { $0 = max($0, count) } } }
                let push = Task { try await Replicator(store: stores[0], peers: [.http(doomedURL, token: writer)]).sync() }
                // Stopped once the node holds the push (its body read, its append under way).
                #expect(await held.wait(until: { $0 >= 1 }), "the push never reached the node")
                node.cancel()
                _ = try? await push.value  // it may have finished, failed or half-finished
                try await Replicator(store: stores[0], peers: [survivor.peer(node: 0, token: writer)]).sync()
                try await Replicator(store: stores[1], peers: [survivor.peer(node: 0, token: reader)]).sync()
                let id = try await survivor.tenantID(tenant)
                let rows = try await survivor.admin.client.query("SELECT count(*), count(DISTINCT (writer, counter)), max(position) FROM events WHERE tenant_id = \(id)")
                for try await (count, distinct, head) in rows.decode((Int64, Int64, Int64).self) {
                    #expect(count == 3_000)
                    #expect(distinct == 3_000)
                    #expect(head == 3_000)
                }
                #expect(stores[1][Key<String>("hub.bulk2999", default: "", sync: .automaticSmall)] == "value 2999")
                #expect(try stores[1].logEntries().count == 3_000)
            }
        }
    }

    /// A `chronicle hub serve` process killed with SIGKILL in the middle of a large push: the
    /// device's next sync, through another node, completes with nothing lost and nothing twice.
    @Test func aNodeProcessKilledMidPushLosesNothing() async throws {
        let url = try #require(testDatabase)
        try await withHub(nodes: 1) { survivor in
            let tenant = try await survivor.tenant()
            let (writer, reader) = (try await survivor.token(tenant, "writer"), try await survivor.token(tenant, "reader"))
            try await withTemporaryStores(2) { stores in
                try stores[0].write { batch in
                    for i in 0..<3_000 { batch[Key<String>("hub.killed\(i)", default: "", sync: .automaticSmall)] = "value \(i)" }
                }
                let result = try await Subprocess.run(
                    .path(FilePath(try chronicleExecutable().path)),
                    arguments: ["hub", "serve", "--database", url, "--host", "127.0.0.1", "--port", "0", "--metrics-port", "0"],
                    input: .none, output: .sequence, error: .discarded
                ) { execution in
                    // A guard, not a measurement: a node that never says it serves is killed too.
                    let deadline = Task { try? await Task.sleep(for: hangGuard); try? execution.send(signal: .kill) }
                    defer { deadline.cancel() }
                    for try await line in execution.standardOutput.strings() where line.hasPrefix("hub serving on") {
                        guard let port = line.split(separator: ":").last.flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) else { continue }
                        let push = Task { try await Replicator(store: stores[0], peers: [.http(URL(string: "http://127.0.0.1:\(port)")!, token: writer)]).sync() }
                        try await Task.sleep(for: .milliseconds(60))
                        try execution.send(signal: .kill)
                        _ = try? await push.value  // finished, failed, or cut off half way
                        break
                    }
                }
                #expect(result.terminationStatus == .signaled(SIGKILL))
                try await Replicator(store: stores[0], peers: [survivor.peer(node: 0, token: writer)]).sync()
                try await Replicator(store: stores[1], peers: [survivor.peer(node: 0, token: reader)]).sync()
                let id = try await survivor.tenantID(tenant)
                let rows = try await survivor.admin.client.query("SELECT count(*), count(DISTINCT (writer, counter)), max(position) FROM events WHERE tenant_id = \(id)")
                for try await (count, distinct, head) in rows.decode((Int64, Int64, Int64).self) {
                    #expect(count == 3_000 && distinct == 3_000 && head == 3_000)
                }
                #expect(try stores[1].logEntries().count == 3_000)
            }
        }
    }

    /// PostgreSQL restarted under the nodes: they reconnect by themselves (requests in between
    /// get 503), and long-polls are woken through the new notification connection.
    @Test func nodesReconnectAfterPostgreSQLRestarts() async throws {
        let environment = ProcessInfo.processInfo.environment
        let pgCtl = try #require(environment["CHRONICLE_TEST_PG_CTL"])
        let data = try #require(environment["CHRONICLE_TEST_PG_DATA"])
        let runAs = (environment["CHRONICLE_TEST_PG_RUN_AS"] ?? "").split(separator: " ").map(String.init)
        try await withHub { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "device")
            try await withTemporaryStores(1) { stores in
                try stores[0].set("before", for: .hubNote)
                try await Replicator(store: stores[0], peers: [hub.peer(node: 0, token: token)]).sync()

                // pg_ctl restart reuses the server's options; its output goes to a file of the cluster.
                let command = runAs + [pgCtl, "-D", data, "-m", "fast", "-w", "-l", data + "/../restart.log", "restart"]
                let restart = try await Subprocess.run(
                    .path(FilePath("/usr/bin/env")), arguments: Arguments(command), output: .discarded, error: .discarded)
                #expect(restart.terminationStatus.isSuccess)

                try stores[0].set("after", for: .hubNote)
                var synced = false
                for _ in 0..<300 where !synced {  // bounds, not measurements
                    do {
                        try await Replicator(store: stores[0], peers: [hub.peer(node: 1, token: token)]).sync()
                        synced = true
                    } catch {
                        try await Task.sleep(for: .milliseconds(100))  // 503 while the pool reconnects
                    }
                }
                #expect(synced)
                let id = try await hub.tenantID(tenant)
                let generation = hub.nodes[0].notifier.generation(id)
                try stores[0].set("after again", for: .hubNote)
                try await Replicator(store: stores[0], peers: [hub.peer(node: 1, token: token)]).sync()
                // Waits on node 0's notifier, which returns at once if the append was heard
                // already (a reconnect's wake of every waiter is waited past).
                let notifier = hub.nodes[0].notifier
                let deadline = ContinuousClock.now + hangGuard
                var heard = notifier.generation(id) > generation
                while !heard, ContinuousClock.now < deadline {
                    await notifier.wait(for: id, past: generation, timeout: hangGuard)
                    heard = notifier.generation(id) > generation
                }
                #expect(heard, "node 0 listens again after the restart")
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
            let held = heldLongPolls(hub, tenant: id)
            defer { hub.nodes[0].notifier.onWaiting.withLock { $0 = nil } }
            let poll = Task {
                try await rawRequest(
                    hub.urls[0].appendingPathComponent("v1/range").appending(queryItems: [.init(name: "after", value: "0"), .init(name: "wait", value: "30")]),
                    token: watcher)
            }
            // Pushed once the poll waits, so it is the notification that answers it.
            #expect(await held.wait(until: { $0 == 1 }), "the long-poll was never held")
            try await withTemporaryStores(1) { stores in
                try stores[0].set("wake up", for: .hubNote)
                try await Replicator(store: stores[0], peers: [hub.peer(node: 1, token: writer)]).sync()
            }
            let response = try await poll.value
            #expect(response.status == 200)
            #expect(try RelayRange(decoding: Array(response.data)).events.count == 1)
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
