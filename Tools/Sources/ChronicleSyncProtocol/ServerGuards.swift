import Hummingbird
package import HummingbirdCore
package import NIOCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The most connections one client address may hold open at once, checked when the connection
/// opens, before any request (and so any token) is read: idle sockets from one address cannot
/// take the slots every other client needs. A connection past the limit is closed at once.
package final class ConnectionsPerAddress: Sendable {
    package let limit: Int
    private let counts = Mutex<[String: Int]>([:])

    /// `limit` 0 turns the check off (a server behind a proxy sees one address for everyone).
    package init(limit: Int) {
        self.limit = limit
    }

    /// The handler each new connection gets (HTTP1 `additionalChannelHandlers`).
    package func handlers() -> [any RemovableChannelHandler] {
        limit > 0 ? [Guard(owner: self)] : []
    }

    /// Who a connection counts against: an IPv4 address, or the /64 an IPv6 address lies in
    /// (a host usually owns a whole /64, so counting single IPv6 addresses would limit nothing);
    /// an IPv4-mapped IPv6 address counts as its IPv4 address.
    package static func client(_ address: SocketAddress) -> String {
        guard case .v6 = address, let text = address.ipAddress else { return address.ipAddress ?? "unknown" }
        var bytes = [UInt8](repeating: 0, count: 16)
        guard inet_pton(AF_INET6, text, &bytes) == 1 else { return text }
        if bytes.prefix(10).allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
            return bytes.suffix(4).map(String.init).joined(separator: ".")
        }
        return bytes.prefix(8).map { String($0, radix: 16) }.joined(separator: ":") + "::/64"
    }

    /// How many connections `address` holds now (for tests).
    package func open(_ address: String) -> Int { counts.withLock { $0[address] ?? 0 } }

    fileprivate func admit(_ address: String) -> Bool {
        counts.withLock { counts in
            let current = counts[address] ?? 0
            guard current < limit else { return false }
            counts[address] = current + 1
            return true
        }
    }

    fileprivate func release(_ address: String) {
        counts.withLock { counts in
            let remaining = (counts[address] ?? 1) - 1
            counts[address] = remaining > 0 ? remaining : nil
        }
    }

    /// Counts its connection in when it becomes active (or is already), out when it closes.
    private final class Guard: ChannelDuplexHandler, RemovableChannelHandler {
        typealias InboundIn = NIOAny
        typealias OutboundIn = NIOAny
        let owner: ConnectionsPerAddress
        var address: String?
        var decided = false

        init(owner: ConnectionsPerAddress) {
            self.owner = owner
        }

        func handlerAdded(context: ChannelHandlerContext) {
            if context.channel.isActive { decide(context) }
        }

        func channelActive(context: ChannelHandlerContext) {
            decide(context)
            context.fireChannelActive()
        }

        func channelInactive(context: ChannelHandlerContext) {
            if let address { owner.release(address) }
            address = nil
            context.fireChannelInactive()
        }

        func handlerRemoved(context: ChannelHandlerContext) {
            if let address { owner.release(address) }
            address = nil
        }

        private func decide(_ context: ChannelHandlerContext) {
            guard !decided else { return }
            decided = true
            let key = context.remoteAddress.map(ConnectionsPerAddress.client) ?? "unknown"
            if owner.admit(key) {
                address = key
            } else {
                context.close(promise: nil)
            }
        }
    }
}

/// The bytes of request bodies a server holds at once, across every connection. A push reserves
/// what it has sent as it arrives, and keeps it until its handler returns; one that would pass
/// the budget is refused with 503 and `Retry-After`. A slow sender holds only what it sent, so
/// declaring a large body and trickling it holds nothing up. Decoding and importing a range
/// takes several times its size, so this bounds the memory pushes in flight can take.
package final class BodyBudget: Sendable {
    package let capacity: Int
    private let used = Mutex(0)

    package init(capacity: Int) {
        self.capacity = capacity
    }

    /// Reads `request`'s body (at most `limit` bytes: 413 past it, declared or streamed),
    /// reserving it as it arrives, and runs `handle` with it; the reservation ends when `handle` returns.
    /// - Throws: `HTTPError` 413 for a body over `limit`, 503 when the budget cannot hold it now.
    package func withBody<R>(of request: Request, limit: Int, _ handle: (ByteBuffer) async throws -> R) async throws -> R {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw HTTPError(.contentTooLarge, message: "a body of \(length) bytes is over the limit of \(limit)")
        }
        var reserved = 0
        defer { release(reserved) }
        var buffer = ByteBuffer()
        for try await chunk in request.body {
            guard buffer.readableBytes + chunk.readableBytes <= limit else {
                throw HTTPError(.contentTooLarge, message: "a body over the limit of \(limit) bytes")
            }
            guard reserve(chunk.readableBytes) else {
                var headers = HTTPFields()
                headers[.retryAfter] = "1"
                throw HTTPError(.serviceUnavailable, headers: headers, message: "the server is receiving as much as it may hold at once; retry")
            }
            reserved += chunk.readableBytes
            buffer.writeImmutableBuffer(chunk)
        }
        return try await handle(buffer)
    }

    private func reserve(_ bytes: Int) -> Bool {
        used.withLock { used in
            guard used + bytes <= capacity else { return false }
            used += bytes
            return true
        }
    }

    private func release(_ bytes: Int) {
        if bytes > 0 { used.withLock { $0 -= bytes } }
    }

    /// Bytes reserved now (for tests).
    package var reserved: Int { used.withLock { $0 } }
}
