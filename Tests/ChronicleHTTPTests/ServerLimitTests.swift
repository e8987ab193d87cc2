import AsyncHTTPClient
@testable import Chronicle
@testable import ChronicleHTTP
import ChronicleTesting
import Foundation
import NIOCore
import NIOHTTP1
import Testing

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
            for _ in 0..<100 where closed < 12 {
                try await Task.sleep(for: .milliseconds(50))
                closed = idle.filter { $0.closedByServer(within: 0) }.count
            }
            #expect(closed == 12, "\(closed) of 16 idle sockets from one address were closed")
            let info = try await rawRequest(url.appendingPathComponent("v1/info"), token: "test-token")
            #expect(info.status == 200, "a client from another address waited behind idle sockets")
        }
    }

    /// Bodies in flight share one budget, counted as they arrive: a push that would pass it is
    /// refused with 503 and Retry-After, and is taken once the budget frees. A push that declares
    /// a large body and trickles it holds only what it sent.
    @Test func pushesPastTheBytesInFlightGetRetryAfter() async throws {
        let directories = Directories()
        let store = try Store(directory: directories.make())
        try await withServer(store, configure: { server in server.maxBodyBytesInFlight = 1 << 20 }) { url in
            let port = try #require(url.port)
            // Declares 900 KB and sends 10 bytes: holds 10 bytes, so a 200 KB push goes through.
            let trickle = try RawSocket(port: port, from: "127.0.0.4")
            defer { trickle.close() }
            trickle.send("POST /v1/range HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token\r\nContent-Length: 900000\r\n\r\n0123456789")
            try await Task.sleep(for: .milliseconds(300))
            let range = try store.exportRange(after: 0)
            #expect(try await rawRequest(url.appendingPathComponent("v1/range"), method: .POST, token: "test-token", body: range).status == 200)
            // Sends 900 KB of its 950 KB and stalls: those 900 KB are held.
            let slow = try RawSocket(port: port, from: "127.0.0.3")
            slow.send("POST /v1/range HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token\r\nContent-Length: 950000\r\n\r\n" + String(repeating: "x", count: 900_000))
            // A 200 KB push is refused once the server has read those bytes (a busy machine may take
            // a moment: until then the push is taken, and answered 400 for its padding).
            var refused: HTTPClientResponse?
            for _ in 0..<100 where refused == nil {
                var request = HTTPClientRequest(url: url.appendingPathComponent("v1/range").absoluteString)
                request.method = .POST
                request.headers.add(name: "Authorization", value: "Bearer test-token")
                request.headers.add(name: "Content-Length", value: "200000")
                request.body = .bytes(ByteBuffer(bytes: Array(range) + [UInt8](repeating: 0, count: 200_000 - range.count)))
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
                if response.status == .serviceUnavailable { refused = response } else { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(refused?.status == .serviceUnavailable)
            #expect(refused?.headers.first(name: "Retry-After") == "1")
            slow.close()
            // Once the slow push is gone, its share is free again.
            var accepted = 0
            for _ in 0..<50 where accepted == 0 {
                if try await rawRequest(url.appendingPathComponent("v1/range"), method: .POST, token: "test-token", body: range).status == 200 { accepted += 1 }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(accepted == 1)
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

