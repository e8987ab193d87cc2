import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Plain TCP sockets, for what an HTTP client library never does: connect from another loopback
/// address, send half a request, or hold a connection idle.
public struct RawSocket: Sendable {
    public let descriptor: Int32

    /// Connects to `127.0.0.1:port` from `source` (any 127.x.y.z works on Linux).
    public init(port: Int, from source: String = "127.0.0.2") throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, source, &local.sin_addr)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr)
        let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        let connected = withUnsafePointer(to: &remote) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, connected == 0 else {
            Glibc.close(descriptor)
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .ECONNREFUSED)
        }
    }

    /// Sends all of `text`, waiting while the socket's buffer is full (a send may take only part).
    public func send(_ text: String) {
        send(bytes: Array(text.utf8))
    }

    /// Sends all of `bytes`, waiting while the socket's buffer is full.
    public func send(bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return }  // the server closed the connection
            sent += count
        }
    }

    /// Whether the server closed the connection (or reset it) within `seconds`.
    public func closedByServer(within seconds: Int32) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, seconds * 1000) > 0 else { return false }
        var byte: UInt8 = 0
        return recv(descriptor, &byte, 1, Int32(MSG_PEEK)) <= 0
    }

    /// ``send(_:)`` on a thread of its own: a large send waits for the server to read, and must not
    /// hold one of the cooperative pool's threads (the server's handlers need them to read).
    public func sendInBackground(_ text: String) {
        let socket = self
        Thread { socket.send(text) }.start()
    }

    /// Whether the server answered with `status` (read from what arrived) or closed the
    /// connection, within `seconds`.
    public func answeredOrClosed(status: Int, within seconds: Int32) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, seconds * 1000) > 0 else { return false }
        var bytes = [UInt8](repeating: 0, count: 64)
        let count = recv(descriptor, &bytes, bytes.count, Int32(MSG_PEEK))
        guard count > 0 else { return true }
        return String(decoding: bytes.prefix(count), as: UTF8.self).hasPrefix("HTTP/1.1 \(status)")
    }

    /// What the server answered so far (at most 4 KiB, left in the socket), or "" when it closed
    /// without a byte.
    public func peekAnswer() -> String {
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = recv(descriptor, &bytes, bytes.count, Int32(MSG_PEEK | MSG_DONTWAIT))
        return count > 0 ? String(decoding: bytes.prefix(count), as: UTF8.self) : ""
    }

    /// Waits until something arrives on the socket (an answer) or the server closes it, watched
    /// by the kernel; false only when `limit` passes first (a hang guard).
    public func readable(within limit: Duration = hangGuard) async -> Bool {
        await Self.readable([self], count: 1, within: limit) == 1
    }

    /// Waits until `count` of `sockets` have something to read or were closed by the server,
    /// with poll(2) on a thread of its own (not one of the cooperative pool's, which a server in
    /// this process needs); returns how many had when it stopped waiting (at `limit` at the latest).
    public static func readable(_ sockets: [RawSocket], count: Int, within limit: Duration) async -> Int {
        let deadline = ContinuousClock.now + limit
        return await withCheckedContinuation { continuation in
            Thread {
                var ready = Set<Int>()
                while ready.count < count {
                    let left = deadline - ContinuousClock.now
                    guard left > .zero else { break }
                    let waiting = sockets.indices.filter { !ready.contains($0) }
                    var entries = waiting.map { pollfd(fd: sockets[$0].descriptor, events: Int16(POLLIN), revents: 0) }
                    let milliseconds = Int32(clamping: left.components.seconds * 1_000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
                    let found = poll(&entries, nfds_t(entries.count), milliseconds)
                    if found < 0 && errno != EINTR { break }
                    for (position, entry) in entries.enumerated() where entry.revents != 0 { ready.insert(waiting[position]) }
                }
                continuation.resume(returning: ready.count)
            }.start()
        }
    }

    public func close() { _ = Glibc.close(descriptor) }
}
