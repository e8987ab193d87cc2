import Hummingbird
import HummingbirdCore
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

    /// Told each new connection's client once the guard decided on it (admitted or refused):
    /// tests wait on it rather than sleep between connections whose order matters.
    let onDecided: (@Sendable (_ client: String, _ admitted: Bool) -> Void)?

    package init(
        maxPerClient: Int, maxUnauthenticated: Int, maxPerOwner: Int = 0, headTimeout: Duration = .seconds(10), grace: Duration = .seconds(1),
        onDecided: (@Sendable (_ client: String, _ admitted: Bool) -> Void)? = nil
    ) {
        self.onDecided = onDecided
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
                owner.onDecided?(client, false)
                return
            }
            admitted = ObjectIdentifier(context.channel)
            armDeadline(context)
            owner.onDecided?(client, true)
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
