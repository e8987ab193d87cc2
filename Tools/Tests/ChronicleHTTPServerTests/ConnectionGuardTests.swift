@testable import Chronicle
@testable import ChronicleHTTPServer
@testable import ChronicleSyncProtocol
import ChronicleTesting
import Foundation
import Testing
import ToolsTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Whether `socket` received an answer starting with `HTTP/1.1 <status>` within `seconds`
/// (false when the server closed it without one).
func answered(_ socket: RawSocket, status: Int, within seconds: Int32) -> Bool {
    var entry = pollfd(fd: socket.descriptor, events: Int16(POLLIN), revents: 0)
    guard poll(&entry, 1, seconds * 1000) > 0 else { return false }
    var bytes = [UInt8](repeating: 0, count: 64)
    let count = recv(socket.descriptor, &bytes, bytes.count, Int32(MSG_PEEK))
    guard count > 0 else { return false }
    return String(decoding: bytes.prefix(count), as: UTF8.self).hasPrefix("HTTP/1.1 \(status)")
}

/// Who may hold `chronicle serve`'s connections (``ConnectionGuard``).
struct ConnectionGuardTests {
    /// A token holder's new connection is a stranger's until its first request head is read and
    /// its token accepted. Strangers from as many addresses as there are strangers' slots (64 by
    /// default: one IPv6 /48 holds 256 /56 "clients"), connecting after it, make it the oldest
    /// stranger, and each newcomer evicts the oldest: a token holder whose head takes longer to
    /// arrive than the strangers take to open that many connections (a TLS handshake on a slow
    /// link) is cut off, every time.
    @Test func strangersConnectingAfterATokenHolderDoNotCutItOff() async throws {
        let directories = Directories()
        let store = try Store(directory: directories.make())
        let decided = Watched<[Bool]>([])  // whether each connection was admitted, in order
        try await withServer(store, configure: { server in
            server.maxConnections = 16
            server.maxUnauthenticatedConnections = 4
            server.connectionGrace = .seconds(30)  // a loaded machine may take a while between the steps below
            server.onConnectionDecided = { _, admitted in decided.update { $0.append(admitted) } }
        }) { url in
            let port = try #require(url.port)
            let holder = try RawSocket(port: port, from: "127.0.0.2")
            defer { holder.close() }
            holder.send("GET /v1/info HTTP/1.1\r\nHost: x\r\n")  // the rest of its head is on its way
            #expect(await decided.wait(until: { $0 == [true] }), "the token holder's connection was never admitted")
            var strangers: [RawSocket] = []
            defer { for socket in strangers { socket.close() } }
            for address in 3..<7 { strangers.append(try RawSocket(port: port, from: "127.0.0.\(address)")) }
            // Every stranger admitted or refused before the holder finishes its head: the fifth
            // connection for four strangers' slots was decided while the holder was still one.
            #expect(await decided.wait(until: { $0.count == 5 }), "the strangers' connections were never decided")
            // Four strangers' slots for five connections: one stranger was turned away, not the holder.
            #expect(decided.value.filter { !$0 }.count == 1, "admitted: \(decided.value)")
            holder.send("Authorization: Bearer test-token\r\n\r\n")
            let arrived = await holder.readable()
            #expect(arrived && answered(holder, status: 200, within: 0), "strangers that connected after a token holder closed its connection")
        }
    }
}
