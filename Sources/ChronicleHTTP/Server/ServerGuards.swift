import Hummingbird
package import HummingbirdCore
package import NIOCore
import Synchronization

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
            let key = context.remoteAddress?.ipAddress ?? "unknown"
            if owner.admit(key) {
                address = key
            } else {
                context.close(promise: nil)
            }
        }
    }
}

/// The bytes of request bodies a server holds at once, across every connection: a push reserves
/// its declared length (or the largest body, when it declares none) before its body is read, and
/// is refused with 503 and `Retry-After` when the budget is spent. Decoding and importing a range
/// takes several times its size, so this bounds the memory pushes in flight can take.
package final class BodyBudget: Sendable {
    package let capacity: Int
    private let used = Mutex(0)

    package init(capacity: Int) {
        self.capacity = capacity
    }

    /// Reserves `bytes` while `body` runs.
    /// - Throws: `HTTPError` 503 when the budget cannot hold them now.
    package func withReservation<R>(_ bytes: Int, _ body: () async throws -> R) async throws -> R {
        let granted = used.withLock { used in
            guard used + bytes <= capacity else { return false }
            used += bytes
            return true
        }
        guard granted else {
            var headers = HTTPFields()
            headers[.retryAfter] = "1"
            throw HTTPError(.serviceUnavailable, headers: headers, message: "the server is receiving as much as it may hold at once; retry")
        }
        defer { used.withLock { $0 -= bytes } }
        return try await body()
    }

    /// Bytes reserved now (for tests).
    package var reserved: Int { used.withLock { $0 } }
}

extension Request {
    /// The body, at most `limit` bytes: 413 for a larger one, declared or streamed (chunked).
    package mutating func collectBody(limit: Int) async throws -> ByteBuffer {
        if let length = headers[.contentLength].flatMap(Int.init), length > limit {
            throw HTTPError(.contentTooLarge, message: "a body of \(length) bytes is over the limit of \(limit)")
        }
        do {
            return try await collectBody(upTo: limit)
        } catch is NIOTooManyBytesError {
            // The stream passed the limit (a chunked body declares no length).
            throw HTTPError(.contentTooLarge, message: "a body over the limit of \(limit) bytes")
        }
    }

    /// What a push reserves of a ``BodyBudget``: its declared length, or `limit` when it declares none.
    package func bodyReservation(limit: Int) -> Int {
        headers[.contentLength].flatMap(Int.init).map { min($0, limit) } ?? limit
    }
}
