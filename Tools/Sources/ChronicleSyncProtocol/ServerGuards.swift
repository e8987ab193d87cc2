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
        /// When it opened, on the monotonic clock: a stranger younger than ``ConnectionGuard/grace`` never gives way.
        var since: ContinuousClock.Instant
        /// Whose token it presented (a hub's tenant), once authenticated.
        var owner: String?
        /// Refused its owner's share: closed once its answer is written.
        var closing = false
        var channel: any Channel
    }

    private struct Counts {
        var byClient: [String: (all: Int, unauthenticated: Int)] = [:]
        var unauthenticated = 0
        var admitted: UInt64 = 0
        /// Authenticated connections by owner.
        var byOwner: [String: Int] = [:]
        /// Each open connection, by channel.
        var connections: [ObjectIdentifier: Connection] = [:]
    }

    private let counts = Mutex(Counts())

    /// The most connections the token holders of one owner (a hub's tenant) hold (0: no limit).
    package let maxPerOwner: Int

    package init(
        maxPerClient: Int, maxUnauthenticated: Int, maxPerOwner: Int = 0, headTimeout: Duration = .seconds(10), grace: Duration = .seconds(1)
    ) {
        self.maxPerClient = maxPerClient
        self.maxUnauthenticated = max(1, maxUnauthenticated)
        self.maxPerOwner = maxPerOwner
        self.headTimeout = headTimeout
        self.grace = grace
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

    /// How long a client's only new connection is safe from giving way to another stranger:
    /// long enough for a token holder on a slow link to finish its handshake and its first
    /// request head. Default 1 s.
    package let grace: Duration

    /// Marks the connection of `channel` as a token holder's (`owner`: whose token; a hub's
    /// tenant): it leaves the strangers' slots. Returns `false` when `owner` already holds its
    /// share of the connections (``maxPerOwner``): the caller refuses the request and closes it.
    @discardableResult
    package func authenticated(_ channel: ObjectIdentifier, owner: String) -> Bool {
        counts.withLock { counts in
            guard let connection = counts.connections[channel] else { return true }
            guard !connection.authenticated else { return true }
            guard maxPerOwner == 0 || (counts.byOwner[owner] ?? 0) < maxPerOwner else {
                counts.connections[channel]?.closing = true
                return false
            }
            counts.connections[channel]?.authenticated = true
            counts.connections[channel]?.owner = owner
            counts.byOwner[owner, default: 0] += 1
            counts.unauthenticated -= 1
            counts.byClient[connection.client]?.unauthenticated -= 1
            return true
        }
    }

    fileprivate func isClosing(_ channel: ObjectIdentifier) -> Bool {
        counts.withLock { $0.connections[channel]?.closing ?? false }
    }

    fileprivate func isAuthenticated(_ channel: ObjectIdentifier) -> Bool {
        counts.withLock { $0.connections[channel]?.authenticated ?? false }
    }

    /// Admits a new connection as a stranger's, or refuses it. A client at its limit gives up
    /// its oldest stranger's connection to the newcomer (everyone behind one NAT address is one
    /// client: a neighbour's idle sockets do not lock the others out), and refuses it only when
    /// every connection it holds has a token. When strangers hold every slot theirs, the
    /// newcomer takes the slot of the oldest connection of the client holding the most of them.
    /// Either way the connection given up is closed, and a client's only stranger's connection
    /// gives way only once it has been open for ``grace`` (else the newcomer is refused): a token
    /// holder's new connection gets in, and leaves the strangers' slots with its first request.
    fileprivate func admit(_ client: String, _ channel: any Channel) -> Bool {
        let evicted = counts.withLock { counts -> (any Channel)?? in
            let current = counts.byClient[client] ?? (0, 0)
            var evicted: (any Channel)?
            let now = ContinuousClock.now
            // Strangers that may give way: any of a client that holds several, else one open for
            // the grace period (a token holder's single new connection is safe while it sends).
            func strangers(of owner: String?) -> [(key: ObjectIdentifier, value: Connection)] {
                counts.connections.filter {
                    !$0.value.authenticated && (owner == nil || $0.value.client == owner)
                        && ((counts.byClient[$0.value.client]?.unauthenticated ?? 0) > 1 || now - $0.value.since >= grace)
                }
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
            let held = counts.byClient[client] ?? (0, 0)
            counts.byClient[client] = (held.all + 1, held.unauthenticated + 1)
            counts.unauthenticated += 1
            counts.admitted += 1
            counts.connections[ObjectIdentifier(channel)] = Connection(
                client: client, authenticated: false, opened: counts.admitted, since: now, owner: nil, channel: channel)
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
        if let owner = connection.owner {
            let left = (counts.byOwner[owner] ?? 1) - 1
            counts.byOwner[owner] = left > 0 ? left : nil
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
            guard case .end = unwrapOutboundIn(data), let admitted else {
                context.write(data, promise: promise)
                return
            }
            if owner.isClosing(admitted) {
                // Refused its owner's share: the answer goes out, then the connection closes.
                let channel = context.channel
                let written = context.eventLoop.makePromise(of: Void.self)
                written.futureResult.whenComplete { _ in channel.close(promise: nil) }
                if let promise { written.futureResult.cascade(to: promise) }
                context.writeAndFlush(data, promise: written)
                return
            }
            if !owner.isAuthenticated(admitted) { armDeadline(context) }  // the next request head of a stranger's connection
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
/// reserves what it has sent as it arrives, and keeps it until its handler returns. A push that
/// finds the budget full cuts off the slowest body still arriving from another owner (408),
/// and waits a moment for the room; one that would pass its owner's share, or finds no body to
/// cut, is refused with 503 and `Retry-After`. A slow sender holds only what it sent, a stalled
/// one is cut off (``MinimumBodyRate``), and bodies that trickle just above the minimum hold the
/// budget only until a push needs it. Decoding and importing a range takes several times its
/// size, so this bounds the memory pushes in flight can take.
package final class BodyBudget: Sendable {
    package let capacity: Int
    /// The most one owner holds at once.
    package let share: Int
    package let minimumRate: MinimumBodyRate

    /// One body's hold on the budget.
    private final class Reservation: Sendable {
        let owner: String
        let started = ContinuousClock.now
        /// Bytes reserved, whether the body has arrived whole, and whether a faster push cut it off.
        let state = Mutex<(bytes: Int, complete: Bool, evicted: Bool)>((0, false, false))

        init(owner: String) { self.owner = owner }
    }

    private struct Use {
        var total = 0
        var byOwner: [String: Int] = [:]
        var active: [ObjectIdentifier: Reservation] = [:]
    }

    private let used = Mutex(Use())

    package init(capacity: Int, share: Int? = nil, minimumRate: MinimumBodyRate = .standard) {
        self.capacity = capacity
        self.share = min(capacity, share ?? capacity)
        self.minimumRate = minimumRate
    }

    /// Reads `request`'s body (at most `limit` bytes: 413 past it, declared or streamed),
    /// reserving it against the budget and `owner`'s share as it arrives, and runs `handle`
    /// with it; the reservation ends when `handle` returns.
    /// - Throws: `HTTPError` 413 for a body over `limit`, 503 when the budget or the owner's
    ///   share cannot hold it now, 408 when it arrives slower than ``minimumRate`` or a push that
    ///   needed the room cut it off.
    package func withBody<R>(of request: Request, limit: Int, owner: String, _ handle: (ByteBuffer) async throws -> R) async throws -> R {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw HTTPError(.contentTooLarge, message: "a body of \(length) bytes is over the limit of \(limit)")
        }
        let reservation = Reservation(owner: owner)
        used.withLock { $0.active[ObjectIdentifier(reservation)] = reservation }
        defer { release(reservation) }
        let body = try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
            group.addTask { try await self.read(request, limit: limit, reservation: reservation) }
            group.addTask { try await self.watch(reservation); return nil }
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

    private func read(_ request: Request, limit: Int, reservation: Reservation) async throws -> ByteBuffer {
        var buffer = ByteBuffer()
        for try await chunk in request.body {
            guard buffer.readableBytes + chunk.readableBytes <= limit else {
                throw HTTPError(.contentTooLarge, message: "a body over the limit of \(limit) bytes")
            }
            try await reserve(chunk.readableBytes, reservation)
            buffer.writeImmutableBuffer(chunk)
        }
        reservation.state.withLock { $0.complete = true }
        return buffer
    }

    /// Returns never; throws 408 once a window of ``minimumRate`` passes with less than its
    /// bytes, or once a push that needed the room cut this body off.
    private func watch(_ reservation: Reservation) async throws {
        var mark = 0
        var windowStart = ContinuousClock.now
        while true {
            try await Task.sleep(for: .milliseconds(100))
            let (bytes, evicted) = reservation.state.withLock { ($0.bytes, $0.evicted) }
            if evicted {
                throw HTTPError(.requestTimeout, headers: Self.closing, message: "the body arrived too slowly while the server needed the room; retry")
            }
            guard ContinuousClock.now - windowStart >= minimumRate.per else { continue }
            guard bytes - mark >= minimumRate.bytes else {
                throw HTTPError(
                    .requestTimeout, headers: Self.closing, message: "the body arrived slower than \(minimumRate.bytes) bytes every \(minimumRate.per)")
            }
            (mark, windowStart) = (bytes, ContinuousClock.now)
        }
    }

    /// Reserves `bytes` more for `reservation`, cutting off the slowest body of another owner
    /// when the budget is full and waiting up to two seconds for its room; 503 otherwise.
    private func reserve(_ bytes: Int, _ reservation: Reservation) async throws {
        for attempt in 0..<40 {
            switch tryReserve(bytes, reservation) {
            case .reserved: return
            case .overShare: break
            case .full:
                if attempt < 39 {
                    try await Task.sleep(for: .milliseconds(50))
                    continue
                }
            }
            var headers = HTTPFields()
            headers[.retryAfter] = "1"
            throw HTTPError(.serviceUnavailable, headers: headers, message: "the server is receiving as much as it may hold at once; retry")
        }
    }

    private enum Reserved { case reserved, overShare, full }

    private func tryReserve(_ bytes: Int, _ reservation: Reservation) -> Reserved {
        let owner = reservation.owner
        var victim: Reservation?
        let outcome = used.withLock { used -> Reserved in
            let held = used.byOwner[owner] ?? 0
            guard held + bytes <= share else { return .overShare }
            guard used.total + bytes > capacity else {
                used.total += bytes
                used.byOwner[owner] = held + bytes
                reservation.state.withLock { $0.bytes += bytes }
                return .reserved
            }
            // Full: cut off the slowest body of another owner still arriving, unless one is already
            // on its way out (its room comes back when its handler returns).
            let now = ContinuousClock.now
            let others = used.active.values.filter { $0.owner != owner }
            let states = others.map { ($0, $0.state.withLock { $0 }) }
            guard !states.contains(where: { $0.1.evicted }) else { return .full }
            victim = states.filter { !$0.1.complete && $0.1.bytes > 0 && now - $0.0.started >= minimumRate.per }
                .min { a, b in
                    Double(a.1.bytes) / (now - a.0.started).seconds < Double(b.1.bytes) / (now - b.0.started).seconds
                }?.0
            return .full
        }
        victim?.state.withLock { $0.evicted = true }
        return outcome
    }

    private func release(_ reservation: Reservation) {
        used.withLock { used in
            used.active[ObjectIdentifier(reservation)] = nil
            let bytes = reservation.state.withLock { $0.bytes }
            guard bytes > 0 else { return }
            used.total -= bytes
            let held = (used.byOwner[reservation.owner] ?? bytes) - bytes
            used.byOwner[reservation.owner] = held > 0 ? held : nil
        }
    }

    /// Bytes reserved now (for tests).
    package var reserved: Int { used.withLock { $0.total } }
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    fileprivate var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
