@_spi(Wire) @_spi(Tools) public import Chronicle
public import ChronicleSyncProtocol
import Foundation
import Hummingbird
import HummingbirdCore
public import Logging
import NIOCore
import NIOPosix

/// Serves a store's log to replicas over HTTP (`chronicle serve`).
///
/// Endpoints, all under `/v1`, all requiring `Authorization: Bearer <token>`:
///
/// | method | path | request | response |
/// |---|---|---|---|
/// | GET | `/v1/info` | — | JSON ``ReplicaInfo`` |
/// | GET | `/v1/range?after=N&filter=syncable\|small:BYTES&exclude=HEX&max=EVENTS` | — | a range (binary; at most `max` ≤ 4,096 events and about 1 MiB) |
/// | POST | `/v1/range` | a range (binary) | JSON ``RangeReceipt``, after the durable commit |
/// | POST | `/v1/events` | identities (binary, FORMAT.md 7.6) | a range of the events with those identities |
///
/// A missing or wrong token gets 401 and touches nothing; a malformed range
/// gets 400 and applies nothing; a body over the limit gets 413 before it is
/// read whole.
public struct ChronicleServer: Sendable {
    /// A certificate and private key for HTTPS.
    public typealias TLS = ServerTLS

    /// The store served.
    public let store: Store
    let token: [UInt8]
    /// The largest push body accepted, in bytes. Default 80 MiB.
    public var maxBodySize: Int = 80 << 20
    /// How long a connection may stay idle before the server closes it. Default 60 s.
    public var idleTimeout: Duration = .seconds(60)
    /// The most connections served at once; more wait until one closes. Default 256.
    public var maxConnections: Int = 256
    /// The most connections one client (an IPv4 address, an IPv6 /56) may hold at once, checked
    /// before any request is read (0: no limit, for a server behind a proxy). Everyone behind one
    /// NAT address shares it: raise it when many devices share an address. Default 32.
    public var maxConnectionsPerAddress: Int = 32
    /// The most connections without an accepted token at once (`nil`: a quarter of
    /// ``maxConnections``); past it, a new connection takes the slot of the oldest one of the
    /// client holding the most of them. Token holders' connections
    /// never count here, so strangers cannot take their slots.
    public var maxUnauthenticatedConnections: Int?
    /// How long a connection without an accepted token has to send a whole request head. Default 10 s.
    public var requestHeadTimeout: Duration = .seconds(10)
    /// How long a client's only new connection is safe from giving way to other strangers (tests
    /// lengthen it to keep a connection, or shorten it instead of waiting it out).
    package var connectionGrace: Duration = .seconds(1)
    /// Told the bytes of push bodies held in all after each reservation grows (tests wait on it).
    package var onBodyBytesReserved: (@Sendable (Int) -> Void)?
    /// Told each new connection's client address once the server admitted or refused it (tests wait on it).
    package var onConnectionDecided: (@Sendable (_ client: String, _ admitted: Bool) -> Void)?
    /// The most bytes of push bodies held at once across every connection; a push past it gets
    /// 503 with `Retry-After`. One client address holds at most half of it. Importing a range
    /// takes several times its size. Default 160 MiB.
    public var maxBodyBytesInFlight: Int = 160 << 20
    /// The slowest a push body may arrive before it is cut off with 408. Default 16 KiB every 10 s.
    public var minimumBodyRate: MinimumBodyRate = .standard
    /// Where requests and errors are logged (never values or tokens).
    public var logger: Logger

    /// A server for `store` that accepts requests carrying `token`.
    public init(store: Store, token: String, logger: Logger = Logger(label: "chronicle.serve")) {
        self.store = store
        self.token = Array(token.utf8)
        self.logger = logger
    }

    /// Runs until the task is cancelled or, with `gracefulShutdownSignals`, until
    /// SIGINT/SIGTERM; in-flight requests finish first.
    ///
    /// - Parameters:
    ///   - host: The address to bind, for example `127.0.0.1`.
    ///   - port: The port (0 picks a free one; `onRunning` says which).
    ///   - tls: Serve HTTPS with this certificate and key.
    ///   - gracefulShutdownSignals: Signals that start a graceful shutdown.
    ///   - onRunning: Called with the bound port once the server accepts connections.
    public func run(
        host: String, port: Int, tls: TLS? = nil, gracefulShutdownSignals: Bool = false,
        onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) async throws {
        let connections = connectionGuard()
        let serverBuilder = try ServerTLS.serverBuilder(idleTimeout: idleTimeout, connections: connections, tls: tls)
        let app = Application(
            router: makeRouter(connections: connections),
            server: serverBuilder,
            configuration: .init(
                address: .hostname(host, port: port), serverName: "chronicle",
                // Past the cap, new connections wait in the backlog until one closes.
                availableConnectionsDelegate: .maximum(maxConnections, logger: logger)),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) },
            logger: logger)
        if gracefulShutdownSignals {
            try await app.runService()
        } else {
            try await app.run()
        }
    }

    func connectionGuard() -> ConnectionGuard {
        ConnectionGuard(
            maxPerClient: maxConnectionsPerAddress, maxUnauthenticated: maxUnauthenticatedConnections ?? max(1, maxConnections / 4),
            headTimeout: requestHeadTimeout, grace: connectionGrace, onDecided: onConnectionDecided)
    }

    func makeRouter(connections: ConnectionGuard? = nil) -> Router<SyncContext<StoreBackend.Caller>> {
        let router = Router(context: SyncContext<StoreBackend.Caller>.self)
        router.add(middleware: AccessLogMiddleware(logger: logger))
        // One client address holds at most half the bytes in flight (at least one whole push).
        let budget = BodyBudget(capacity: maxBodyBytesInFlight, share: max(maxBodyBytesInFlight / 2, maxBodySize), minimumRate: minimumBodyRate,
            onReserved: onBodyBytesReserved)
        SyncRoutes.install(
            on: router, backend: StoreBackend(store: store, token: BearerTokenCheck(token: token)),
            refusal: "missing or wrong bearer token", maxBodySize: maxBodySize, budget: budget, connections: connections, logger: logger)
        return router
    }
}

/// The protocol served from one store: one token, the store's log.
struct StoreBackend: SyncBackend {
    /// The token matched: there is no one else to tell apart.
    struct Caller: Sendable {}

    let store: Store
    let token: BearerTokenCheck

    func caller(presenting token: String) async throws -> Caller? {
        self.token.accepts(Array(token.utf8)) ? Caller() : nil
    }

    func info(for caller: Caller) async throws -> WireInfo {
        let store = store
        return WireInfo(try await offload { try store.replicaInfo() })
    }

    /// A store answers at once: it holds no long-poll (`wait` is the hub's).
    func range(for caller: Caller, _ query: RangeQuery) async throws -> [UInt8] {
        let store = store
        let data = try await offload {
            try store.exportRange(after: query.after, filter: query.filter, excludingOrigin: query.excluding, maxEvents: query.maxEvents)
        }
        return Array(data)
    }

    /// One token stands for everyone: pushes share the budget by client address.
    func bodyOwner(_ caller: Caller, client: String) -> String { client }

    /// One token, one owner: connections are shared by client address only.
    func connectionOwner(_ caller: Caller) -> String { "" }

    func events(for caller: Caller, _ identities: [EventIdentity]) async throws -> (range: [UInt8], whole: [Bool]) {
        let store = store
        let answer = try await offload { try store.answerEvents(identities) }
        return (Array(answer.range), answer.answeredWhole ?? [])
    }

    /// A store keeps no push marks: the filter is not needed.
    func push(_ body: [UInt8], filter: RangeFilter?, from caller: Caller, client: String) async throws -> RangeReceipt {
        let (store, data) = (store, Data(body))
        // Key derivations (Argon2id, up to a second each) run before the import, on a thread of
        // the push's own, in turns by client address across the process: a push that brings no
        // key to derive never waits for one that does, and one client's queue of derivations
        // delays another client's record by one run. Imports run on their own thread, one at a
        // time (they serialize on the store's write lock anyway).
        // One source for both: what waits in the quarantine is retried in the same client's turns.
        let source = "HTTP push from \(client)"
        let prepared = try await screening { try store.prepareImport(data, source: source) }
        return try await importing { try store.importPrepared(prepared, from: source) }
    }
}

/// Runs blocking store work (a durable commit may fsync) on NIO's blocking thread pool,
/// off the event loops and off Swift's cooperative pool.
func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await NIOThreadPool.singleton.runIfActive { try work() }
}

/// Runs an import on a thread of its own, one at a time: an import never takes a thread that
/// serves pulls and info requests, and imports of one store serialize on its write lock anyway.
func importing<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        importQueue.async { continuation.resume(with: Result { try work() }) }
    }
}

private let importQueue = DispatchQueue(label: "chronicle.serve.imports", qos: .utility)

/// Screens a push's key records on a thread of its own: a screening waiting for its turn to
/// derive (``DerivationTurns``) parks only its own thread, never one another push, a pull or an
/// info request needs; a push whose keys the store holds is screened at once. Threads are
/// bounded by the server's connections.
func screening<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try work() }) }
        thread.name = "chronicle.serve.screening"
        thread.start()
    }
}

extension ChronicleServer: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The store served; never the token.
    public var description: String { "ChronicleServer(\(store.directory.path), token: <redacted>)" }
    /// The same as ``description``: nothing secret.
    public var debugDescription: String { description }
    /// A mirror without the token (`dump` and the debugger).
    public var customMirror: Mirror { Mirror(self, children: ["store": store.directory.path, "maxBodySize": maxBodySize], displayStyle: .struct) }
}
