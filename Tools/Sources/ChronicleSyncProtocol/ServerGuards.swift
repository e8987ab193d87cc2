import Hummingbird
package import HummingbirdCore
package import NIOCore
import NIOHTTPTypes
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Who may hold a server's connections, checked before any request (and so any token) is read.
///
/// Every connection starts *unauthenticated* (a stranger's) and becomes authenticated when a
/// request on it presents a token the server accepts. Strangers' connections are capped in
/// total (``maxUnauthenticated``, well below the server's connections), and each must finish a
/// request head within ``headTimeout`` of opening or of its last answer: half-sent heads from
/// many addresses take at most the strangers' slots, never those of token holders. A client
/// (an IPv4 address, or an IPv6 /56, one home delegation) holds at most ``maxPerClient``
/// connections in all. Past a limit, a stranger's connection gives way to the newcomer
/// (``admit(_:_:)``), or the newcomer is closed at once, unread.
package final class ConnectionGuard: Sendable {
    /// The most connections one client holds (0: no per-client limit, for a server behind a
    /// proxy, which is one address for everyone).
    package let maxPerClient: Int
    /// The most strangers' connections at once, across every client.
    package let maxUnauthenticated: Int
    /// How long a connection without a token has to send a whole request head.
    package let headTimeout: Duration

    private struct Connection {
        var client: String
        var authenticated: Bool
        /// When it opened, in admission order (the oldest stranger gives way first).
        var opened: UInt64
        var channel: any Channel
    }

    private struct Counts {
        var byClient: [String: (all: Int, unauthenticated: Int)] = [:]
        var unauthenticated = 0
        var admitted: UInt64 = 0
        /// Each open connection, by channel.
        var connections: [ObjectIdentifier: Connection] = [:]
    }

    private let counts = Mutex(Counts())

    package init(maxPerClient: Int, maxUnauthenticated: Int, headTimeout: Duration = .seconds(10)) {
        self.maxPerClient = maxPerClient
        self.maxUnauthenticated = max(1, maxUnauthenticated)
        self.headTimeout = headTimeout
    }

    /// The handler each new connection gets (HTTP1 `additionalChannelHandlers`, evaluated per connection).
    package func handlers() -> [any RemovableChannelHandler] {
        [Guard(owner: self)]
    }

    /// Who a connection counts against: an IPv4 address, or the /56 an IPv6 address lies in (a
    /// home gets a /56, 256 /64s: counting smaller prefixes would let one household take 256
    /// shares); an IPv4-mapped IPv6 address counts as its IPv4 address. Everyone behind one NAT
    /// address is one client: an operator whose users share addresses raises ``maxPerClient``.
    package static func client(_ address: SocketAddress) -> String {
        guard case .v6 = address, let text = address.ipAddress else { return address.ipAddress ?? "unknown" }
        var bytes = [UInt8](repeating: 0, count: 16)
        guard inet_pton(AF_INET6, text, &bytes) == 1 else { return text }
        if bytes.prefix(10).allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
            return bytes.suffix(4).map(String.init).joined(separator: ".")
        }
        return bytes.prefix(7).map { String($0, radix: 16) }.joined(separator: ":") + "::/56"
    }

    /// How many connections `client` holds now (for tests).
    package func open(_ client: String) -> Int { counts.withLock { $0.byClient[client]?.all ?? 0 } }

    /// Marks the connection of `channel` as a token holder's: it leaves the strangers' slots.
    package func authenticated(_ channel: ObjectIdentifier) {
        counts.withLock { counts in
            guard let connection = counts.connections[channel], !connection.authenticated else { return }
            counts.connections[channel]?.authenticated = true
            counts.unauthenticated -= 1
            counts.byClient[connection.client]?.unauthenticated -= 1
        }
    }

    fileprivate func isAuthenticated(_ channel: ObjectIdentifier) -> Bool {
        counts.withLock { $0.connections[channel]?.authenticated ?? false }
    }

    /// Admits a new connection as a stranger's, or refuses it. A client at its limit gives up
    /// its oldest stranger's connection to the newcomer (everyone behind one NAT address is one
    /// client: a neighbour's idle sockets do not lock the others out), and refuses it only when
    /// every connection it holds has a token. When strangers hold every slot theirs, the
    /// newcomer takes the slot of the oldest connection of the client holding the most of them.
    /// Either way the connection given up is closed: a token holder's new connection gets in,
    /// and leaves the strangers' slots with its first request.
    fileprivate func admit(_ client: String, _ channel: any Channel) -> Bool {
        let evicted = counts.withLock { counts -> (any Channel)?? in
            let current = counts.byClient[client] ?? (0, 0)
            var evicted: (any Channel)?
            func strangers(of owner: String?) -> [(key: ObjectIdentifier, value: Connection)] {
                counts.connections.filter { !$0.value.authenticated && (owner == nil || $0.value.client == owner) }
            }
            if maxPerClient > 0, current.all >= maxPerClient {
                guard let victim = strangers(of: client).min(by: { $0.value.opened < $1.value.opened }) else { return .none }
                forget(victim.key, &counts)
                evicted = victim.value.channel
            } else if counts.unauthenticated >= maxUnauthenticated {
                let victim = strangers(of: nil).max { a, b in
                    let (ca, cb) = (counts.byClient[a.value.client]?.unauthenticated ?? 0, counts.byClient[b.value.client]?.unauthenticated ?? 0)
                    return ca != cb ? ca < cb : a.value.opened > b.value.opened
                }
                guard let victim else { return .none }
                forget(victim.key, &counts)
                evicted = victim.value.channel
            }
            let now = counts.byClient[client] ?? (0, 0)
            counts.byClient[client] = (now.all + 1, now.unauthenticated + 1)
            counts.unauthenticated += 1
            counts.admitted += 1
            counts.connections[ObjectIdentifier(channel)] = Connection(client: client, authenticated: false, opened: counts.admitted, channel: channel)
            return .some(evicted)
        }
        guard case let .some(victim) = evicted else { return false }
        victim?.close(promise: nil)
        return true
    }

    private func forget(_ channel: ObjectIdentifier, _ counts: inout Counts) {
        guard let connection = counts.connections.removeValue(forKey: channel) else { return }
        var current = counts.byClient[connection.client] ?? (1, 1)
        current.all -= 1
        if !connection.authenticated {
            current.unauthenticated -= 1
            counts.unauthenticated -= 1
        }
        counts.byClient[connection.client] = current.all > 0 ? current : nil
    }

    fileprivate func release(_ channel: ObjectIdentifier) {
        counts.withLock { counts in forget(channel, &counts) }
    }

    /// Counts its connection in when it becomes active, out when it closes, and closes it when a
    /// stranger's request head is not complete in time.
    private final class Guard: ChannelDuplexHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPRequestPart
        typealias OutboundIn = HTTPResponsePart
        let owner: ConnectionGuard
        var admitted: ObjectIdentifier?
        var decided = false
        var deadline: Scheduled<Void>?

        init(owner: ConnectionGuard) {
            self.owner = owner
        }

        func handlerAdded(context: ChannelHandlerContext) {
            if context.channel.isActive { decide(context) }
        }

        func channelActive(context: ChannelHandlerContext) {
            decide(context)
            context.fireChannelActive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if case .head = unwrapInboundIn(data) {
                deadline?.cancel()
                deadline = nil
            }
            context.fireChannelRead(data)
        }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            if case .end = unwrapOutboundIn(data), let admitted, !owner.isAuthenticated(admitted) {
                armDeadline(context)  // the next request head of a stranger's connection
            }
            context.write(data, promise: promise)
        }

        func channelInactive(context: ChannelHandlerContext) {
            leave()
            context.fireChannelInactive()
        }

        func handlerRemoved(context: ChannelHandlerContext) {
            leave()
        }

        private func leave() {
            deadline?.cancel()
            deadline = nil
            if let admitted { owner.release(admitted) }
            admitted = nil
        }

        private func decide(_ context: ChannelHandlerContext) {
            guard !decided else { return }
            decided = true
            let client = context.remoteAddress.map(ConnectionGuard.client) ?? "unknown"
            guard owner.admit(client, context.channel) else {
                context.close(promise: nil)
                return
            }
            admitted = ObjectIdentifier(context.channel)
            armDeadline(context)
        }

        private func armDeadline(_ context: ChannelHandlerContext) {
            deadline?.cancel()
            let channel = context.channel
            let (owner, id) = (owner, ObjectIdentifier(channel))
            let timeout = TimeAmount.nanoseconds(
                Int64(owner.headTimeout.components.seconds) * 1_000_000_000 + owner.headTimeout.components.attoseconds / 1_000_000_000)
            deadline = context.eventLoop.scheduleTask(in: timeout) {
                if !owner.isAuthenticated(id) { channel.close(promise: nil) }
            }
        }
    }
}

/// The least rate at which a request body must keep arriving: at least `bytes` in every
/// `per`. A body that trickles (a byte now and then keeps a connection from being idle) is cut
/// off with 408, and what it held is released.
public struct MinimumBodyRate: Sendable {
    /// The bytes that must arrive in every window.
    public var bytes: Int
    /// The window.
    public var per: Duration

    /// At least `bytes` in every `per`.
    public init(bytes: Int, per: Duration) {
        self.bytes = bytes
        self.per = per
    }

    /// 16 KiB every 10 s: a 16 MiB push on the slowest link still arrives within ~17 minutes.
    public static let standard = MinimumBodyRate(bytes: 16 << 10, per: .seconds(10))
}

/// The bytes of request bodies a server holds at once, across every connection, and what one
/// owner (a hub's tenant, a client address of `chronicle serve`) may hold of them. A push
/// reserves what it has sent as it arrives, and keeps it until its handler returns; one that
/// would pass the budget or its owner's share is refused with 503 and `Retry-After`. A slow
/// sender holds only what it sent, and a stalled one is cut off (``MinimumBodyRate``).
/// Decoding and importing a range takes several times its size, so this bounds the memory
/// pushes in flight can take.
package final class BodyBudget: Sendable {
    package let capacity: Int
    /// The most one owner holds at once.
    package let share: Int
    package let minimumRate: MinimumBodyRate
    private let used = Mutex<(total: Int, byOwner: [String: Int])>((0, [:]))

    package init(capacity: Int, share: Int? = nil, minimumRate: MinimumBodyRate = .standard) {
        self.capacity = capacity
        self.share = min(capacity, share ?? capacity)
        self.minimumRate = minimumRate
    }

    /// Reads `request`'s body (at most `limit` bytes: 413 past it, declared or streamed),
    /// reserving it against the budget and `owner`'s share as it arrives, and runs `handle`
    /// with it; the reservation ends when `handle` returns.
    /// - Throws: `HTTPError` 413 for a body over `limit`, 503 when the budget or the owner's
    ///   share cannot hold it now, 408 when it arrives slower than ``minimumRate``.
    package func withBody<R>(of request: Request, limit: Int, owner: String, _ handle: (ByteBuffer) async throws -> R) async throws -> R {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw HTTPError(.contentTooLarge, message: "a body of \(length) bytes is over the limit of \(limit)")
        }
        let reserved = Reservation()
        defer { release(reserved.bytes.withLock { $0 }, owner: owner) }
        let body = try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
            group.addTask { try await self.read(request, limit: limit, owner: owner, reserved: reserved) }
            group.addTask { try await self.watch(reserved); return nil }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let result { return result }
            }
            throw HTTPError(.requestTimeout, headers: Self.closing, message: "the body stopped arriving")
        }
        return try await handle(body)
    }

    /// A 408 closes the connection: the rest of a trickled body is never read.
    private static let closing: HTTPFields = [.connection: "close"]

    /// What one body has reserved so far.
    private final class Reservation: Sendable {
        let bytes = Mutex(0)
    }

    private func read(_ request: Request, limit: Int, owner: String, reserved: Reservation) async throws -> ByteBuffer {
        var buffer = ByteBuffer()
        for try await chunk in request.body {
            guard buffer.readableBytes + chunk.readableBytes <= limit else {
                throw HTTPError(.contentTooLarge, message: "a body over the limit of \(limit) bytes")
            }
            guard reserve(chunk.readableBytes, owner: owner) else {
                var headers = HTTPFields()
                headers[.retryAfter] = "1"
                throw HTTPError(.serviceUnavailable, headers: headers, message: "the server is receiving as much as it may hold at once; retry")
            }
            reserved.bytes.withLock { $0 += chunk.readableBytes }
            buffer.writeImmutableBuffer(chunk)
        }
        return buffer
    }

    /// Returns never; throws 408 once a window of ``minimumRate`` passes with less than its bytes.
    private func watch(_ reserved: Reservation) async throws {
        var mark = 0
        while true {
            try await Task.sleep(for: minimumRate.per)
            let now = reserved.bytes.withLock { $0 }
            guard now - mark >= minimumRate.bytes else {
                throw HTTPError(
                    .requestTimeout, headers: Self.closing, message: "the body arrived slower than \(minimumRate.bytes) bytes every \(minimumRate.per)")
            }
            mark = now
        }
    }

    private func reserve(_ bytes: Int, owner: String) -> Bool {
        used.withLock { used in
            let held = used.byOwner[owner] ?? 0
            guard used.total + bytes <= capacity, held + bytes <= share else { return false }
            used.total += bytes
            used.byOwner[owner] = held + bytes
            return true
        }
    }

    private func release(_ bytes: Int, owner: String) {
        guard bytes > 0 else { return }
        used.withLock { used in
            used.total -= bytes
            let held = (used.byOwner[owner] ?? bytes) - bytes
            used.byOwner[owner] = held > 0 ? held : nil
        }
    }

    /// Bytes reserved now (for tests).
    package var reserved: Int { used.withLock { $0.total } }
}
