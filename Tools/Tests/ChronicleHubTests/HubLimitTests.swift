import AsyncHTTPClient
import ChronicleTesting
@_spi(Wire) @_spi(Tools) @testable import Chronicle
@testable import ChronicleHub
import ChronicleSyncProtocol
import Foundation
import NIOCore
import NIOHTTP1
import Subprocess
import SystemPackage
import Testing
import ToolsTestSupport

/// What a request the protocol does not allow gets from a hub node: its own status, never
/// "database unavailable".
extension HubTests {
    @Test func anOversizedChunkedPushGets413AndAMalformedQuery400() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "device")
            var request = HTTPClientRequest(url: hub.urls[0].appendingPathComponent("v1/range").absoluteString)
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            let chunks = AsyncStream<ByteBuffer> { continuation in
                for _ in 0..<17 { continuation.yield(ByteBuffer(bytes: [UInt8](repeating: 7, count: 1 << 20))) }
                continuation.finish()
            }
            request.body = .stream(chunks, length: .unknown)
            let response = try await testHTTPClient.execute(request, timeout: requestHangGuard)
            #expect(response.status.code == 413)
            for (name, value) in [("max", "abc"), ("wait", "soon")] {
                let url = hub.urls[0].appendingPathComponent("v1/range").appending(queryItems: [.init(name: "after", value: "0"), .init(name: name, value: value)])
                #expect(try await rawRequest(url, token: token).status == 400, "\(name)=\(value)")
            }
        }
    }

    /// A device token of one tenant sends all but the last bytes of a big push and stalls it,
    /// then seven more: its tenant's share of the node's body budget fills (the seven get 503),
    /// never another tenant's, so the other tenant's pushes are taken. (Every other tenant got 503 for as long as it liked.)
    @Test func oneTenantsStalledPushesDoNotStarveAnother() async throws {
        let reserved = Watched(0)
        try await withHub(nodes: 1, configure: { node in
            node.maxBodySize = 256 << 10
            node.maxBodyBytesInFlight = 1 << 20
            node.onBodyBytesReserved = { total in reserved.update { $0 = max($0, total) } }  // the peak: reports may cross
            node.minimumBodyRate = .init(bytes: 1, per: .seconds(600))  // a stall is held for the whole test, however slow the machine
        }) { hub in
            let (stalling, other) = (try await hub.tenant(), try await hub.tenant())
            let (carrier, member) = (try await hub.token(stalling, "carrier"), try await hub.token(other, "member"))
            let port = try #require(hub.urls[0].port)
            let length = 256 << 10
            var sockets: [RawSocket] = []
            defer { for socket in sockets { socket.close() } }
            func stall(from index: Int) throws {
                let socket = try RawSocket(port: port, from: "127.0.1.\(index + 1)")
                sockets.append(socket)
                socket.sendInBackground(
                    "POST /v1/range HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(carrier)\r\nContent-Length: \(length)\r\n\r\n"
                        + String(repeating: "x", count: length - 16))
            }
            // One push sends all but 16 bytes and stalls: it holds its tenant's share (256 KiB).
            try stall(from: 0)
            #expect(await reserved.wait(until: { $0 == length - 16 }), "the stalled push never filled its tenant's share")
            // Seven more of the same tenant find the share full: each is refused (503).
            for index in 1..<8 { try stall(from: index) }
            let refused = await RawSocket.readable(Array(sockets[1...]), count: 7, within: hangGuard)
            #expect(refused == 7, "\(refused) of the 7 pushes past the tenant's share were answered")
            try await withTemporaryStores(1) { stores in
                try stores[0].set("from another tenant", for: .hubNote)
                let answer = try await rawRequest(
                    hub.urls[0].appendingPathComponent("v1/range"), method: .POST, token: member, body: try stores[0].exportRange(after: 0))
                #expect(answer.status == 200, "\(answer.status) \(answer.body)")
            }
            #expect(!sockets[0].answeredOrClosed(status: 408, within: 0), "the stalled push was let go before the other tenant pushed")
        }
    }

    /// Without a token, idle request heads from many source addresses take at most the slots a
    /// node keeps for strangers: a device of a tenant is served. (Sixteen addresses took every
    /// slot of a node, and a device waited out its timeout.)
    @Test func idleRequestHeadsFromManyAddressesDoNotLockOutADevice() async throws {
        try await withHub(nodes: 1, configure: { node in
            node.maxConnections = 32
            node.maxConnectionsPerAddress = 2
            node.connectionGrace = .zero  // the strangers may give way as soon as they hold the slots
        }) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "phone")
            let port = try #require(hub.urls[0].port)
            var idle: [RawSocket] = []
            defer { for socket in idle { socket.close() } }
            for address in 1...16 {
                for _ in 0..<2 {
                    let socket = try RawSocket(port: port, from: "127.0.4.\(address)")
                    socket.send("GET /v1/info HTTP/1.1\r\nHost: x\r\n")
                    idle.append(socket)
                }
            }
            // The strangers' slots are 8 (a quarter of the connections): each of the 24 others
            // closed one, given way or refused. Once 24 are closed the strangers hold every slot.
            let closed = await RawSocket.readable(idle, count: 24, within: hangGuard)
            #expect(closed == 24, "\(closed) of 32 idle sockets were closed: the strangers do not hold the slots")
            let info = try await rawRequest(hub.urls[0].appendingPathComponent("v1/info"), token: token)
            #expect(info.status == 200, "a device waited behind strangers' half-sent request heads")
        }
    }

    /// `chronicle hub tenant add` gives a new tenant quotas unless told `--unlimited`: one
    /// tenant's devices cannot fill the database by default.
    @Test func newTenantsGetQuotasByDefault() async throws {
        let url = try #require(testDatabase)
        try await withHub(nodes: 1) { hub in
            let (limited, unlimited) = ("t-\(UUID().uuidString.prefix(12).lowercased())", "t-\(UUID().uuidString.prefix(12).lowercased())")
            for arguments in [["hub", "tenant", "add", limited], ["hub", "tenant", "add", unlimited, "--unlimited"]] {
                let result = try await Subprocess.run(
                    .path(FilePath(try chronicleExecutable().path)), arguments: Arguments(arguments),
                    environment: .inherit.updating(["CHRONICLE_HUB_DATABASE": url]), output: .discarded, error: .string(limit: 1 << 16))
                #expect(result.terminationStatus == .exited(0), "\(result.standardError)")
            }
            let tenants = try await hub.admin.tenants()
            let first = try #require(tenants.first { $0.name == limited })
            #expect(first.maxEvents == 1_000_000 && first.maxBytes == 1 << 30)
            let second = try #require(tenants.first { $0.name == unlimited })
            #expect(second.maxEvents == nil && second.maxBytes == nil)
            // The same through `tenant list --json`: one object per tenant, no limit as no field.
            let list = try await runChronicle(["hub", "tenant", "list", "--json"], environment: ["CHRONICLE_HUB_DATABASE": url])
            #expect(list.status == 0, "\(list.stderr)")
            let objects = try list.stdout.split(separator: "\n").map { line in
                try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            }
            let listed = try #require(objects.first { $0["tenant"] as? String == limited })
            #expect((listed["maxEvents"] as? NSNumber)?.intValue == 1_000_000)
            let open = try #require(objects.first { $0["tenant"] as? String == unlimited })
            #expect(open["maxEvents"] == nil && (open["devices"] as? NSNumber)?.intValue == 0)
        }
    }

    /// `chronicle hub token issue --output FILE` writes the token to a new file of mode 0600, the
    /// file `chronicle sync --token-file` accepts (a shell redirect made a 0644 file it refused).
    @Test func anIssuedTokenFileIsPrivate() async throws {
        let url = try #require(testDatabase)
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-token-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            defer { try? FileManager.default.removeItem(at: folder) }
            let file = folder.appendingPathComponent("phone.token")
            for attempt in 0..<2 {
                let result = try await Subprocess.run(
                    .path(FilePath(try chronicleExecutable().path)),
                    arguments: ["hub", "token", "issue", "--tenant", tenant, "--device", "phone", "--output", file.path],
                    environment: .inherit.updating(["CHRONICLE_HUB_DATABASE": url]), output: .discarded, error: .string(limit: 1 << 16))
                // The second refuses to overwrite the first's file, and issues nothing.
                #expect(result.terminationStatus == .exited(attempt == 0 ? 0 : 2), "\(result.standardError)")
            }
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? NSNumber)
            #expect(mode.intValue & 0o777 == 0o600)
            let token = String(decoding: try SecretFile.contents(of: file, what: "token file"), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try await hub.admin.device(token: token) == HubDevice(tenant: try await hub.tenantID(tenant), name: "phone", tokenHash: HubDatabase.tokenHash(token)))
        }
    }
}

