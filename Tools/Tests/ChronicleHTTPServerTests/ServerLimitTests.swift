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
            _ = await RawSocket.readable(idle, count: 12, within: hangGuard)
            let closed = idle.filter { $0.closedByServer(within: 0) }.count
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
        let reserved = Watched(0)
        try await withServer(store, configure: { server in
            server.maxBodyBytesInFlight = 1 << 20
            server.onBodyBytesReserved = { total in reserved.update { $0 = max($0, total) } }  // the peak: reports may cross
        }) { url in
            let port = try #require(url.port)
            // Declares 900 KB and sends 10 bytes: holds 10 bytes.
            let trickle = try RawSocket(port: port, from: "127.0.0.4")
            defer { trickle.close() }
            trickle.send("POST /v1/range HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token\r\nContent-Length: 900000\r\n\r\n0123456789")
            #expect(await reserved.wait(until: { $0 == 10 }), "the trickling push's 10 bytes never arrived")
            let range = try store.exportRange(after: 0)
            // 200 KB (a range and padding): taken and judged (400 for the padding), not refused with
            // 503 as it was when a push reserved its declared length (900 KB + 200 KB > 1 MiB).
            let padded = range + Data(count: 200_000 - range.count)
            let answer = try await rawRequest(url.appendingPathComponent("v1/range"), method: .POST, token: "test-token", body: padded)
            #expect(answer.status == 400, "\(answer.status) \(answer.body)")
        }
    }

    /// A token holder that sends all but the last bytes of big pushes and then trickles one byte
    /// at a time holds at most its address's share of the bytes in flight: a push from another
    /// address is taken. (Two such pushes took the whole budget: every other push got 503.)
    @Test func stalledPushesFromOneAddressDoNotStarveAnother() async throws {
        let directories = Directories()
        let store = try Store(directory: directories.make())
        let reserved = Watched(0)
        try await withServer(store, configure: { server in
            server.maxBodySize = 512 << 10
            server.maxBodyBytesInFlight = 1 << 20
            server.onBodyBytesReserved = { total in reserved.update { $0 = max($0, total) } }  // the peak: reports may cross
            server.minimumBodyRate = .init(bytes: 1, per: .seconds(600))  // a stall is held for the whole test, however slow the machine
        }) { url in
            let port = try #require(url.port)
            let length = 512 << 10
            var stalled: [RawSocket] = []
            defer { for socket in stalled { socket.close() } }
            func stall() throws {
                let socket = try RawSocket(port: port, from: "127.0.0.3")
                stalled.append(socket)
                socket.sendInBackground(
                    "POST /v1/range HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token\r\nContent-Length: \(length)\r\n\r\n"
                        + String(repeating: "x", count: length - 16))
            }
            // One push sends all but 16 bytes and stalls: it holds its address's share (half the budget).
            try stall()
            #expect(await reserved.wait(until: { $0 == length - 16 }), "the stalled push never filled its address's share")
            // FORMAT.md 8: a second push from the address, past its share, gets 503 with Retry-After at once.
            try stall()
            #expect(await stalled[1].readable(), "the push past the address's share was never answered")
            let refusal = stalled[1].peekAnswer()
            #expect(refusal.hasPrefix("HTTP/1.1 503"), "the push past the share got: \(refusal.prefix(60))")
            #expect(refusal.lowercased().contains("retry-after: 1"), "the 503 did not say Retry-After")
            let range = try store.exportRange(after: 0)
            let answer = try await rawRequest(url.appendingPathComponent("v1/range"), method: .POST, token: "test-token", body: range)
            #expect(answer.status == 200, "\(answer.status) \(answer.body)")
            #expect(!stalled[0].answeredOrClosed(status: 408, within: 0), "the stalled push was let go before the other address pushed")
        }
    }

    /// A body that stops arriving (a byte now and then keeps a connection from being idle) is cut
    /// off once it falls below the minimum rate, and what it held is released.
    @Test func aBodyBelowTheMinimumRateIsCutOff() async throws {
        let directories = Directories()
        let store = try Store(directory: directories.make())
        try await withServer(store, configure: { server in server.minimumBodyRate = .init(bytes: 1_024, per: .seconds(1)) }) { url in
            let port = try #require(url.port)
            let trickle = try RawSocket(port: port, from: "127.0.0.4")
            defer { trickle.close() }
            trickle.send("POST /v1/range HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token\r\nContent-Length: 100000\r\n\r\n0123456789")
            var cut = false
            for _ in 0..<300 where !cut {  // at most 30 s: a bound, not a measurement
                trickle.send("x")
                cut = trickle.answeredOrClosed(status: 408, within: 0)
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(cut, "a push trickling 10 bytes a second was never cut off")
            // FORMAT.md 8: cut off with 408 and `Connection: close`, not a bare close.
            let answer = trickle.peekAnswer()
            #expect(answer.hasPrefix("HTTP/1.1 408"), "the cut-off push got no 408: \(answer.prefix(80))")
            #expect(answer.lowercased().contains("connection: close"), "the 408 did not say Connection: close")
        }
    }

    /// Connections that never finish a request head, from many addresses, take at most the slots
    /// left to connections without a token: a token holder from another address is served.
    @Test func idleRequestHeadsFromManyAddressesDoNotLockOutATokenHolder() async throws {
        let directories = Directories()
        let store = try Store(directory: directories.make())
        try await withServer(store, configure: { server in
            server.maxConnections = 16
            server.maxConnectionsPerAddress = 4
            server.connectionGrace = .zero  // the strangers may give way as soon as they hold the slots
        }) { url in
            let port = try #require(url.port)
            var idle: [RawSocket] = []
            defer { for socket in idle { socket.close() } }
            for address in 2..<10 {
                for _ in 0..<2 {
                    let socket = try RawSocket(port: port, from: "127.0.0.\(address)")
                    socket.send("GET /v1/info HTTP/1.1\r\nHost: x\r\n")
                    idle.append(socket)
                }
            }
            // The strangers' slots are 4 (a quarter of the connections): each of the 12 others
            // closed one, given way or refused. Once 12 are closed the strangers hold every slot.
            let closed = await RawSocket.readable(idle, count: 12, within: hangGuard)
            #expect(closed == 12, "\(closed) of 16 idle sockets were closed: the strangers do not hold the slots")
            let info = try await rawRequest(url.appendingPathComponent("v1/info"), token: "test-token")
            #expect(info.status == 200, "a token holder waited behind half-sent request heads")
        }
    }

    /// A connection that does not finish its first request head within the head deadline is closed.
    @Test func aRequestHeadPastItsDeadlineIsClosed() async throws {
        let directories = Directories()
        let store = try Store(directory: directories.make())
        try await withServer(store, configure: { server in server.requestHeadTimeout = .seconds(1) }) { url in
            let port = try #require(url.port)
            let slow = try RawSocket(port: port, from: "127.0.0.5")
            defer { slow.close() }
            let garbage = try RawSocket(port: port, from: "127.0.0.6")
            defer { garbage.close() }
            slow.send("GET /v1/info HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            var (closed, garbageClosed) = (false, false)
            for _ in 0..<300 where !closed || !garbageClosed {  // at most 30 s: a bound, not a measurement
                slow.send("a")  // a header line that never ends, a byte at a time
                garbage.send("X")  // not even a request line
                closed = closed || slow.closedByServer(within: 0)
                garbageClosed = garbageClosed || garbage.answeredOrClosed(status: 400, within: 0)
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(closed)
            #expect(garbageClosed)
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
            let response = try await testHTTPClient.execute(request, timeout: requestHangGuard)
            #expect(response.status.code == 413)
        }
    }

    /// A query the protocol does not allow gets 400, not a default.
    @Test func aMalformedQueryGets400() async throws {
        let directories = Directories()
        let store = try Store(directory: directories.make())
        try await withServer(store) { url in
            let malformed: [(String, String)] = [
                ("max", "abc"), ("max", ""), ("max", "1e3"), ("max", "-"), ("max", String(repeating: "1", count: 21)),
                ("max", "9223372036854775808"),
                // FORMAT.md 8: `after` is an unsigned decimal; a sign gets 400 (`+1` was read as 1).
                ("after", "+1"), ("after", "-1"), ("after", "18446744073709551616"), ("after", "0x10"), ("after", ""),
                ("filter", "bogus"), ("filter", "small:-1"), ("filter", "small:"), ("exclude", "zz"), ("exclude", "00"),
                ("wait", "soon"),
            ]
            for (name, value) in malformed {
                var items = [URLQueryItem(name: name, value: value)]
                if name != "after" { items.append(.init(name: "after", value: "0")) }
                let response = try await rawRequest(url.appendingPathComponent("v1/range").appending(queryItems: items), token: "test-token")
                #expect(response.status == 400, "\(name)=\(value) answered \(response.status)")
            }
            let fine = try await rawRequest(url.appendingPathComponent("v1/range").appending(queryItems: [.init(name: "after", value: "0"), .init(name: "max", value: "99999")]), token: "test-token")
            #expect(fine.status == 200)  // clamped to 4,096
            let top = try await rawRequest(url.appendingPathComponent("v1/range").appending(queryItems: [.init(name: "after", value: "18446744073709551615")]), token: "test-token")
            #expect(top.status == 200)  // the largest u64: answered from the head
        }
    }

    /// FORMAT.md 7.6 and 8: a request for events by identity whose body is longer or shorter than
    /// its count says, of another version, or counting more than 1,024 gets 400 at `serve` too.
    @Test func aMalformedEventRequestGets400() async throws {
        let directories = Directories()
        let store = try Store(directory: directories.make())
        try await withServer(store) { url in
            let one = [UInt8](repeating: 7, count: 16) + [0, 0, 0, 0, 0, 0, 0, 1]
            let malformed: [(String, [UInt8])] = [
                ("longer", [1, 0, 1] + one + [0]),
                ("shorter", [1, 0, 2] + one),
                ("version 2", [2, 0, 1] + one),
                ("1,025 identities", [1, 0x04, 0x01] + [UInt8](repeating: 7, count: 24 * 8)),
                ("empty", []),
            ]
            for (name, body) in malformed {
                let response = try await rawRequest(url.appendingPathComponent("v1/events"), method: .POST, token: "test-token", body: Data(body))
                #expect(response.status == 400, "\(name) answered \(response.status)")
            }
            let fine = try await rawRequest(url.appendingPathComponent("v1/events"), method: .POST, token: "test-token", body: Data([1, 0, 1] + one))
            #expect(fine.status == 200)
        }
    }

    /// Connections count per IPv4 address, and per /56 for IPv6 (one home delegation: 256
    /// /64s, so counting /64s let one household take 256 shares); an IPv4-mapped address counts
    /// as its IPv4 address.
    @Test func connectionsCountPerIPv4AddressAndPerIPv6Delegation() throws {
        let client = ConnectionGuard.client
        #expect(client(try SocketAddress(ipAddress: "2001:db8:1:2::1", port: 1)) == client(try SocketAddress(ipAddress: "2001:db8:1:2:ffff::9", port: 2)))
        #expect(client(try SocketAddress(ipAddress: "2001:db8:1:2::1", port: 1)) == client(try SocketAddress(ipAddress: "2001:db8:1:ff::1", port: 1)))
        #expect(client(try SocketAddress(ipAddress: "2001:db8:1:2::1", port: 1)) != client(try SocketAddress(ipAddress: "2001:db8:1:102::1", port: 1)))
        #expect(client(try SocketAddress(ipAddress: "::ffff:10.0.0.1", port: 1)) == "10.0.0.1")
        #expect(client(try SocketAddress(ipAddress: "10.0.0.1", port: 1)) == "10.0.0.1")
    }
}

