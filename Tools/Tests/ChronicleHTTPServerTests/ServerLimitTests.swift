import AsyncHTTPClient
@testable import Chronicle
@testable import ChronicleFormat
@testable import ChronicleHTTPServer
@testable import ChronicleSyncProtocol
import ChronicleHTTP
import ChronicleTesting
import Foundation
import NIOCore
import NIOHTTP1
import Testing
import ToolsTestSupport

/// What a client without the token can hold of `chronicle serve`: a few connections per
/// address, a bounded share of the bytes in flight, and a clear status for what it sends wrong.
struct ServerLimitTests {
    /// Idle sockets from one address fill that address's share, not the server: a client from
    /// another address is served at once, and the sockets past the share are closed unread.
    @Test func idleSocketsFromOneAddressDoNotBlockOthers() async throws {
        let directories = Directories()
        let store = try Store(directory: directories.make())
        try await withServer(store, configure: { server in
            server.maxConnections = 16
            server.maxConnectionsPerAddress = 4
        }) { url in
            let port = try #require(url.port)
            var idle: [RawSocket] = []
            defer { for socket in idle { socket.close() } }
            for _ in 0..<16 { idle.append(try RawSocket(port: port, from: "127.0.0.2")) }
            // The server closes every socket past the address's share without waiting for a request.
            var closed = 0
            for _ in 0..<600 where closed < 12 {  // at most 30 s: a bound, not a measurement
                try await Task.sleep(for: .milliseconds(50))
                closed = idle.filter { $0.closedByServer(within: 0) }.count
            }
            #expect(closed == 12, "\(closed) of 16 idle sockets from one address were closed")
            let info = try await rawRequest(url.appendingPathComponent("v1/info"), token: "test-token")
            #expect(info.status == 200, "a client from another address waited behind idle sockets")
        }
    }

    /// Bodies in flight share one budget, counted as they arrive: a push that declares a body
    /// nearly as large as the budget and trickles it holds only what it sent, so other pushes go on.
    @Test func aTricklingPushHoldsOnlyWhatItSent() async throws {
        let directories = Directories()
        let store = try Store(directory: directories.make())
        try await withServer(store, configure: { server in server.maxBodyBytesInFlight = 1 << 20 }) { url in
            let port = try #require(url.port)
            // Declares 900 KB and sends 10 bytes: holds 10 bytes.
            let trickle = try RawSocket(port: port, from: "127.0.0.4")
            defer { trickle.close() }
            trickle.send("POST /v1/range HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token\r\nContent-Length: 900000\r\n\r\n0123456789")
            try await Task.sleep(for: .milliseconds(300))
            let range = try store.exportRange(after: 0)
            // 200 KB (a range and padding): taken and judged (400 for the padding), not refused with
            // 503 as it was when a push reserved its declared length (900 KB + 200 KB > 1 MiB).
            let padded = range + Data(count: 200_000 - range.count)
            let answer = try await rawRequest(url.appendingPathComponent("v1/range"), method: .POST, token: "test-token", body: padded)
            #expect(answer.status == 400, "\(answer.status) \(answer.body)")
        }
    }

    /// A chunked body (no length declared) over the limit gets 413 like a declared one.
    @Test func anOversizedChunkedBodyGets413() async throws {
        let directories = Directories()
        let store = try Store(directory: directories.make())
        try await withServer(store, maxBodySize: 4096) { url in
            var request = HTTPClientRequest(url: url.appendingPathComponent("v1/range").absoluteString)
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer test-token")
            let chunks = AsyncStream<ByteBuffer> { continuation in
                for _ in 0..<8 { continuation.yield(ByteBuffer(bytes: [UInt8](repeating: 7, count: 1024))) }
                continuation.finish()
            }
            request.body = .stream(chunks, length: .unknown)
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
            #expect(response.status.code == 413)
        }
    }

    /// A query the protocol does not allow gets 400, not a default.
    @Test func aMalformedMaxGets400() async throws {
        let directories = Directories()
        let store = try Store(directory: directories.make())
        try await withServer(store) { url in
            for max in ["abc", "", "1e3", "-"] {
                let response = try await rawRequest(url.appendingPathComponent("v1/range").appending(queryItems: [.init(name: "after", value: "0"), .init(name: "max", value: max)]), token: "test-token")
                #expect(response.status == 400, "max=\(max) answered \(response.status)")
            }
            let fine = try await rawRequest(url.appendingPathComponent("v1/range").appending(queryItems: [.init(name: "after", value: "0"), .init(name: "max", value: "99999")]), token: "test-token")
            #expect(fine.status == 200)  // clamped to 4,096
        }
    }

    /// Connections count per IPv4 address, and per /64 for IPv6 (a host owns a whole /64);
    /// an IPv4-mapped address counts as its IPv4 address.
    @Test func connectionsCountPerIPv4AddressAndPerIPv6Prefix() throws {
        let client = ConnectionsPerAddress.client
        #expect(client(try SocketAddress(ipAddress: "2001:db8:1:2::1", port: 1)) == client(try SocketAddress(ipAddress: "2001:db8:1:2:ffff::9", port: 2)))
        #expect(client(try SocketAddress(ipAddress: "2001:db8:1:2::1", port: 1)) != client(try SocketAddress(ipAddress: "2001:db8:1:3::1", port: 1)))
        #expect(client(try SocketAddress(ipAddress: "::ffff:10.0.0.1", port: 1)) == "10.0.0.1")
        #expect(client(try SocketAddress(ipAddress: "10.0.0.1", port: 1)) == "10.0.0.1")
    }
}

