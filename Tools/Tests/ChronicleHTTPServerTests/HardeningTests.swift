@testable import Chronicle
@testable import ChronicleFormat
@testable import ChronicleHTTPServer
import ChronicleHTTP
import ChronicleTesting
import Foundation
import Synchronization
import Testing
import ToolsTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A TCP connection made with plain sockets (a client that misbehaves on purpose).
private final class RawConnection: Sendable {
    let descriptor: Int32

    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(result == 0)
        var timeout = timeval(tv_sec: 30, tv_usec: 0)  // never hang the suite
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sends one request and reads (the start of) its answer: then the server has surely accepted
    /// the connection, which stays open (keep-alive).
    func exchangeOneRequest() -> Bool {
        let request = "GET /v1/info HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        _ = request.withCString { send(descriptor, $0, strlen($0), 0) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        return recv(descriptor, &buffer, buffer.count, 0) > 0
    }

    /// Blocks until the server closes the connection (`true`) or 30 s pass (`false`).
    func waitForClose() -> Bool {
        var byte: UInt8 = 0
        return recv(descriptor, &byte, 1, 0) == 0
    }

    deinit { close(descriptor) }
}

/// A server that answers every request with a redirect to `location`.
private func redirectingServer(to location: String) throws -> (port: Int, stop: @Sendable () -> Void) {
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) } }
    listen(listener, 8)
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
    let port = Int(UInt16(bigEndian: address.sin_port))
    Thread.detachNewThread {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            var buffer = [UInt8](repeating: 0, count: 4096)
            _ = recv(client, &buffer, buffer.count, 0)
            let response = "HTTP/1.1 302 Found\r\nLocation: \(location)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            _ = response.withCString { send(client, $0, strlen($0), 0) }
            close(client)
        }
    }
    return (port, { shutdown(listener, Int32(SHUT_RDWR)); close(listener) })
}

struct HardeningTests {
    private func runServer(_ server: ChronicleServer) async throws -> (port: Int, task: Task<Void, any Error>) {
        try await startServer(server)
    }

    @Test func plainHTTPToAnotherMachineIsRefused() async throws {
        let directories = Directories()
        let store = try Store(directory: directories.make())
        let remote = URL(string: "http://192.0.2.10:7070")!  // TEST-NET-1: never contacted
        await #expect { try await Replicator(store: store, peers: [.http(remote, token: "t")]).sync() } throws: { error in
            "\(error)".contains("plain HTTP to another machine")
        }
        #expect(HTTPTransport.isLoopback(URL(string: "http://127.0.0.1:1")!) && HTTPTransport.isLoopback(URL(string: "http://localhost")!))
        #expect(!HTTPTransport.isLoopback(remote))
    }

    @Test func redirectsAreNotFollowed() async throws {
        let directories = Directories()
        let served = try Store(directory: directories.make())
        let (port, task) = try await runServer(ChronicleServer(store: served, token: "t0ken"))
        defer { task.cancel() }
        // A server that sends the client (and its token) elsewhere, here to the real one.
        let redirect = try redirectingServer(to: "http://127.0.0.1:\(port)/v1/info")
        defer { redirect.stop() }
        let store = try Store(directory: directories.make())
        let peer = Peer.http(URL(string: "http://127.0.0.1:\(redirect.port)")!, token: "t0ken")
        await #expect { try await Replicator(store: store, peers: [peer]).sync() } throws: { error in
            "\(error)".contains("302")
        }
    }

    @Test func idleConnectionsAreClosed() async throws {
        let directories = Directories()
        var server = ChronicleServer(store: try Store(directory: directories.make()), token: "t0ken")
        server.idleTimeout = .seconds(1)
        let (port, task) = try await runServer(server)
        defer { task.cancel() }
        let idle = try RawConnection(port: port)
        #expect(idle.waitForClose())  // a connection that sends nothing is closed by the server
    }

    @Test func connectionsAreCapped() async throws {
        let directories = Directories()
        var server = ChronicleServer(store: try Store(directory: directories.make()), token: "t0ken")
        server.maxConnections = 1
        let (port, task) = try await runServer(server)
        defer { task.cancel() }
        // With the one allowed connection held, a request is not served…
        var holder: RawConnection? = try RawConnection(port: port)
        #expect(holder?.exchangeOneRequest() == true)  // accepted, and kept open
        var transport = HTTPTransport(baseURL: URL(string: "http://127.0.0.1:\(port)")!, token: "t0ken")
        transport.timeout = .seconds(1)
        await #expect(throws: (any Error).self) { _ = try await transport.info() }
        // …until it is closed.
        withExtendedLifetime(holder) {}
        holder = nil
        transport.timeout = .seconds(30)
        // The client that gave up may still be in the server's backlog, and a stranger's
        // connection accepted after this one takes its slot: a client asks again.
        var info: ReplicaInfo?
        for _ in 0..<5 where info == nil { info = try? await transport.info() }
        #expect(info?.protocolVersion == EventRange.protocolVersion)
    }
}
