@_spi(Wire) @testable import Chronicle
@_spi(Wire) @testable import ChronicleFormat
@testable import ChronicleHub
import AsyncHTTPClient
import ChronicleTesting
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import Synchronization
import Testing
import ToolsTestSupport

/// A structurally valid wrapped key (section 6.2) that nobody can open: what a device holding a
/// token but no key can push.
func junkWrappedKey(sealed: Int = 48) -> [UInt8] {
    func random(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255) } }
    var bytes: [UInt8] = [1] + random(16) + [2] + [UInt8](repeating: 0, count: 16 + 8 + 8) + [UInt8](repeating: 0, count: 8) + random(24)
    bytes += withUnsafeBytes(of: UInt32(sealed).bigEndian, Array.init) + random(sealed)
    return bytes
}

/// An event (its authenticator forged) that names the key of `record` (a wrapped key's bytes).
func eventNaming(_ record: [UInt8]) -> [UInt8] {
    Event(
        origin: .random(), counter: 1, replica: .random(), hlc: HLC(rawValue: 1 << 20), domain: .defaults, op: .set, policy: .manual,
        encoding: 6, sealed: false, key: "k", payload: [1],
        authenticator: Event.Authenticator(
            keyID: KeyID(bytes: record[1..<17])!, tag: AuthenticationTag(bytes: [UInt8](repeating: 0, count: 32))!)
    ).encoded()
}

/// A range holding `keys` and `events` as items (the bounds and chains do not matter to the hub).
func handMadeRange(keys: [[UInt8]] = [], events: [[UInt8]] = []) -> Data {
    Data(
        RelayRange.encode(
            source: [UInt8](repeating: 9, count: 16), epoch: [UInt8](repeating: 1, count: 16), after: 0, upTo: 0, head: 0,
            afterChain: RelayRange.emptyChain, upToChain: RelayRange.emptyChain, keys: keys, events: events))
}

/// The hub under failure and abuse: forged bodies, junk keys, revoked tokens, failed commits.
extension HubTests {
/// Nested in HubTests so that they never run while another
/// hub test restarts PostgreSQL (the parent suite is serialized).
@Suite struct HubFailureTests {
    /// A device with a token but without the group's key pushes an identity of another writer
    /// with other bytes before the writer does: the genuine event must still reach the members
    /// (a relay that verifies nothing keeps each distinct body, FORMAT.md 7.2; the hub kept the
    /// first and counted the genuine one as a duplicate, losing it for good).
    @Test func aForgedBodyPushedFirstDoesNotSwallowTheGenuineEvent() async throws {
        try await withHub { hub in
            let tenant = try await hub.tenant()
            let (mallory, honest, reader) = (try await hub.token(tenant, "mallory"), try await hub.token(tenant, "honest"), try await hub.token(tenant, "reader"))
            try await withTemporaryStores(2, configuration: groupConfiguration("family secret")) { stores in
                try stores[0].set("genuine", for: .hubNote)
                let genuine = try RelayRange(decoding: Array(try stores[0].exportRange(after: 0)))
                let event = try #require(genuine.events.first)
                var forged = event.bytes
                forged[forged.count - 1] ^= 0xFF  // the authenticator's tag: still an event, no longer authentic
                let squat = try await rawRequest(hub.urls[0].appendingPathComponent("v1/range"), method: .POST, token: mallory, body: handMadeRange(events: [forged]))
                #expect(squat.status == 200)
                try await Replicator(store: stores[0], peers: [hub.peer(node: 1, token: honest)]).sync()
                try await Replicator(store: stores[1], peers: [hub.peer(node: 0, token: reader)]).sync()
                #expect(stores[1][.hubNote] == "genuine", "the genuine event was dropped as a duplicate of the forged one")
            }
        }
    }

    /// One tenant's appends waiting for its row lock (a slow append: a push of 65,536 wrapped
    /// keys is 65,536 round trips under the lock) must not take every pooled connection of a
    /// node: another tenant's requests on that node still answer.
    @Test func oneTenantsQueuedPushesDoNotStarveOtherTenants() async throws {
        try await withHub(nodes: 1) { hub in
            let (noisy, quiet) = (try await hub.tenant(), try await hub.tenant())
            let (noisyToken, quietToken) = (try await hub.token(noisy, "d"), try await hub.token(quiet, "d"))
            let id = try await hub.tenantID(noisy)
            let body = handMadeRange(keys: [junkWrappedKey()])
            let url = hub.urls[0]
            // Clients of their own: HTTPClient.shared opens at most 8 connections to a host.
            var configuration = HTTPClient.Configuration()
            configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
            let devices = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            let other = HTTPClient(eventLoopGroupProvider: .singleton)
            let held = heldAppends(hub, tenant: id)
            defer { hub.nodes[0].database.appendQueue.onHeld.withLock { $0 = nil } }
            let (pushes, answered) = try await whileHoldingRowLock(hub, tenant: id) { _ in
                let pushes = (0..<48).map { _ in
                    Task {
                        var request = HTTPClientRequest(url: url.appendingPathComponent("v1/range").absoluteString)
                        request.method = .POST
                        request.headers.add(name: "Authorization", value: "Bearer \(noisyToken)")
                        request.body = .bytes(ByteBuffer(bytes: body))
                        _ = try? await devices.execute(request, timeout: requestHangGuard)
                    }
                }
                // Every push is the node's: one in its turn, waiting on the row lock, the rest queued.
                #expect(await held.wait(until: { $0 >= 48 }), "the pushes did not reach the node's queue")
                // The row lock is held until this returns: a starved node never answers, however
                // long the bound; a loaded machine answers late. A hang guard, not a measurement.
                let answered = await finishes {
                    var request = HTTPClientRequest(url: url.appendingPathComponent("v1/info").absoluteString)
                    request.headers.add(name: "Authorization", value: "Bearer \(quietToken)")
                    let info = try await other.execute(request, timeout: requestHangGuard)
                    #expect(info.status.code == 200)
                }
                return (pushes, answered)
            }
            for push in pushes { _ = await push.value }
            try await devices.shutdown()
            try await other.shutdown()
            #expect(answered, "a tenant's queued pushes took every pooled connection of the node")
        }
    }

    /// Wrapped keys are bytes a tenant stores too: its byte quota must count them (they were
    /// stored without limit: a tenant at its quota could still store 16 MiB per push).
    @Test func wrappedKeysCountAgainstTheByteQuota() async throws {
        try await withHub(nodes: 1) { hub in
            let quota: Int64 = 64 << 10
            let tenant = try await hub.tenant(maxBytes: quota)
            var answers: [RawResponse] = []
            for device in 0..<4 {
                // Records no event names are not kept at all: these are named by events of the push.
                // 40 a push from devices of their own, below the 64 a device may store, so the byte
                // quota is what refuses (about 42 KB a push against 64 KiB).
                let token = try await hub.token(tenant, "d\(device)")
                let keys = (0..<40).map { _ in junkWrappedKey(sealed: 1_000) }
                let body = handMadeRange(keys: keys, events: keys.map(eventNaming))
                answers.append(try await rawRequest(hub.urls[0].appendingPathComponent("v1/range"), method: .POST, token: token, body: body))
            }
            let statuses = answers.map(\.status)
            #expect(statuses.first == 200, "\(answers.first?.body ?? "")")
            #expect(answers.contains { $0.status == 507 && $0.body.contains("quota of \(quota) bytes") }, "\(answers.map(\.body))")
            let id = try await hub.tenantID(tenant)
            let rows = try await hub.admin.client.query("SELECT coalesce(sum(length(body)), 0)::bigint FROM wrapped_keys WHERE tenant_id = \(id)")
            var stored: Int64 = 0
            for try await bytes in rows.decode(Int64.self) { stored = bytes }
            #expect(stored <= quota, "\(stored) bytes of keys stored under a quota of \(quota)")
        }
    }

    /// A device with a token but no key pushes 1,024 junk wrapped keys whose digests sort before
    /// the tenant's real key: pulls carry "at most 1,024 keys, by digest", so a new member never
    /// gets the real key and every sealed value and authenticated event stays unreadable.
    @Test func junkWrappedKeysDoNotHideTheTenantsRealKey() async throws {
        try await withHub { hub in
            let tenant = try await hub.tenant()
            let (laptop, phone, mallory) = (try await hub.token(tenant, "laptop"), try await hub.token(tenant, "phone"), try await hub.token(tenant, "mallory"))
            try await withTemporaryStores(2, configuration: groupConfiguration("family secret")) { stores in
                try stores[0].set("s3cret-value", for: .hubSecret)
                try stores[0].set("from the laptop", for: .hubNote)
                try await Replicator(store: stores[0], peers: [hub.peer(node: 0, token: laptop)]).sync()
                let id = try await hub.tenantID(tenant)
                let rows = try await hub.admin.client.query("SELECT digest FROM wrapped_keys WHERE tenant_id = \(id) ORDER BY digest LIMIT 1")
                var lowest: [UInt8] = []
                for try await digest in rows.decode(Data.self) { lowest = Array(digest) }
                #expect(!lowest.isEmpty)
                var junk: [[UInt8]] = []
                while junk.count < 1_024 {
                    let key = junkWrappedKey()
                    if RelayRange.Key(id: [], bytes: key).digest.lexicographicallyPrecedes(lowest) { junk.append(key) }
                }
                _ = try await rawRequest(hub.urls[1].appendingPathComponent("v1/range"), method: .POST, token: mallory, body: handMadeRange(keys: junk))
                _ = try? await Replicator(store: stores[1], peers: [hub.peer(node: 1, token: phone)]).sync()
                #expect(stores[1][.hubNote] == "from the laptop", "the phone never got the tenant's key")
                #expect(try stores[1].value(for: .hubSecret) == "s3cret-value")
            }
        }
    }

    /// A token revoked while its long-poll is held: the poll must not deliver what other devices
    /// push after the revocation (it read the log again after the wait without asking whether
    /// the token still stands).
    @Test func aRevokedDevicesLongPollGetsNothingPushedAfterTheRevocation() async throws {
        try await withHub { hub in
            let tenant = try await hub.tenant()
            let (watcher, writer) = (try await hub.token(tenant, "watcher"), try await hub.token(tenant, "writer"))
            let url = hub.urls[0].appendingPathComponent("v1/range").appending(queryItems: [.init(name: "after", value: "0"), .init(name: "wait", value: "30")])
            let held = heldLongPolls(hub, tenant: try await hub.tenantID(tenant))
            defer { hub.nodes[0].notifier.onWaiting.withLock { $0 = nil } }
            let poll = Task { try await rawRequest(url, token: watcher) }
            // Revoked while the poll is held (a poll that came after would be refused at once).
            #expect(await held.wait(until: { $0 == 1 }), "the long-poll was never held")
            #expect(try await hub.admin.revokeToken(tenant: tenant, device: "watcher"))
            try await withTemporaryStores(1) { stores in
                try stores[0].set("pushed after the revocation", for: .hubNote)
                try await Replicator(store: stores[0], peers: [hub.peer(node: 1, token: writer)]).sync()
            }
            let response = try await poll.value
            let leaked = try response.status == 200 && !(RelayRange(decoding: Array(response.data)).events.isEmpty)
            #expect(!leaked, "a revoked token received an event pushed after its revocation (status \(response.status))")
        }
    }

    /// The database fails the commit of a push (a deferred check, a connection lost at COMMIT):
    /// the device must get 503 (retry), as for any other database failure, not 500.
    @Test func aFailedCommitIsA503() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "d")
            let id = try await hub.tenantID(tenant)
            try await hub.admin.client.query(PostgresQuery(unsafeSQL: """
                CREATE OR REPLACE FUNCTION failing_commit_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN IF NEW.tenant_id = \(id) THEN RAISE EXCEPTION 'the commit fails' USING ERRCODE = '40001'; END IF; RETURN NEW; END $$
                """))
            try await hub.admin.client.query(PostgresQuery(unsafeSQL: "DROP TRIGGER IF EXISTS failing_commit_trigger ON events"))
            try await hub.admin.client.query(PostgresQuery(unsafeSQL: """
                CREATE CONSTRAINT TRIGGER failing_commit_trigger AFTER INSERT ON events DEFERRABLE INITIALLY DEFERRED
                FOR EACH ROW EXECUTE FUNCTION failing_commit_trigger()
                """))
            let status: Int
            do {
                let response = try await withTemporaryStores(1) { stores in
                    try stores[0].set("v", for: .hubNote)
                    return try await rawRequest(hub.urls[0].appendingPathComponent("v1/range"), method: .POST, token: token, body: try stores[0].exportRange(after: 0))
                }
                status = response.status
            }
            try await hub.admin.client.query(PostgresQuery(unsafeSQL: "DROP TRIGGER IF EXISTS failing_commit_trigger ON events"))
            #expect(status == 503)
        }
    }

    /// FORMAT.md 13: a pushed event whose counter is above 2^48 is refused with its range (400),
    /// and nothing of the range is stored.
    @Test func anAbsurdCounterRefusesItsRange() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "d")
            func event(counter: UInt64) -> [UInt8] {
                Event(
                    origin: .random(), counter: counter, replica: .random(), hlc: HLC(rawValue: 1 << 20), domain: .defaults, op: .set,
                    policy: .manual, encoding: 6, sealed: false, key: "k", payload: [1]
                ).encoded()
            }
            let push = hub.urls[0].appendingPathComponent("v1/range")
            let refused = try await rawRequest(push, method: .POST, token: token, body: handMadeRange(events: [event(counter: 1), event(counter: (1 << 48) + 1)]))
            #expect(refused.status == 400, "\(refused.status) \(refused.body)")
            #expect(try await hub.admin.tenants().first { $0.name == tenant }?.events == 0, "nothing of the refused range")
            let control = try await rawRequest(push, method: .POST, token: token, body: handMadeRange(events: [event(counter: 1 << 48)]))
            #expect(control.status == 200, "a counter of 2^48 is allowed: \(control.body)")
        }
    }
}
}
