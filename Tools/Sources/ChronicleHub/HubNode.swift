@_spi(Wire) import ChronicleFormat
public import ChronicleSyncProtocol
import Foundation
import Hummingbird
import HummingbirdCore
public import Logging
import NIOCore
import PostgresNIO
public import Prometheus
import ServiceLifecycle
import Synchronization
import UnixSignals
public import CoreMetrics

/// One hub process: serves every tenant from the shared PostgreSQL database, speaking the
/// protocol of `chronicle serve` (docs/FORMAT.md, section 8), so a device cannot tell them apart.
/// Stateless: run as many as you like behind a load balancer.
///
/// | method | path | |
/// |---|---|---|
/// | GET | `/v1/info` | the tenant's relay id, epoch and head |
/// | GET | `/v1/range?after=N&filter=…&exclude=HEX&max=EVENTS&wait=SECONDS` | a range of the tenant's log; with `wait` (≤ 30), a long-poll: held until another device of the tenant pushes (through any node) or the time is up |
/// | POST | `/v1/range` | appends a range; JSON receipt after the commit |
/// | POST | `/v1/events` | the tenant's events with the identities the body names (FORMAT.md 7.6) |
///
/// On ``operatorEndpoint`` only, never on the public port (they need no token):
///
/// | method | path | |
/// |---|---|---|
/// | GET | `/healthz` | 200 when the database answers, else 503 |
/// | GET | `/metrics` | Prometheus text format |
///
/// Statuses: 401 missing, unknown or revoked token; 400 malformed range or query; 413 body over
/// ``maxBodySize``; 507 the tenant's quota is reached; 503 the database is unavailable (retry).
public struct HubNode: Sendable {
    /// The database (its connection pool runs with the node).
    public let database: HubDatabase
    /// The largest push body accepted, in bytes. Default 16 MiB.
    public var maxBodySize: Int = 16 << 20
    /// The longest a long-poll is held. Default 30 s.
    public var maxWait: Duration = .seconds(30)
    /// How long a connection may stay idle before the node closes it. Default 75 s (above ``maxWait``).
    public var idleTimeout: Duration = .seconds(75)
    /// The most connections served at once; one tenant's devices hold at most half of them (a
    /// request past that gets 503 and its connection closes). Default 1,024.
    public var maxConnections: Int = 1_024
    /// The most connections one client (an IPv4 address, an IPv6 /56) may hold at once, checked
    /// before any token is read (0: no limit; set it to 0 or raise it behind a load balancer,
    /// which is one address, or where many users share a NAT address). Default 64.
    public var maxConnectionsPerAddress: Int = 64
    /// The most connections without an accepted token at once (`nil`: a quarter of
    /// ``maxConnections``); past it, a new connection takes the slot of the oldest one of the
    /// client holding the most of them. Token holders' connections
    /// never count here, so strangers cannot take their slots.
    public var maxUnauthenticatedConnections: Int?
    /// How long a connection without an accepted token has to send a whole request head. Default 10 s.
    public var requestHeadTimeout: Duration = .seconds(10)
    /// How long a client's only new connection is safe from giving way to other strangers
    /// (``ConnectionGuard/grace``; tests shorten it instead of waiting it out).
    package var connectionGrace: Duration = .seconds(1)
    /// Told the bytes of push bodies held in all after each reservation grows (tests wait on it).
    package var onBodyBytesReserved: (@Sendable (Int) -> Void)?
    /// The slowest a push body may arrive before it is cut off with 408. Default 16 KiB every 10 s.
    public var minimumBodyRate: MinimumBodyRate = .standard
    /// Where `/healthz` and `/metrics` are served: an address of their own (`chronicle hub serve`
    /// binds loopback by default), never the public port. `nil`: not served.
    public var operatorEndpoint: OperatorEndpoint?

    /// The address of the operator's endpoints (`/healthz`, `/metrics`).
    public struct OperatorEndpoint: Sendable {
        /// The address to bind.
        public var host: String
        /// The port; 0 picks a free one (`run`'s `onOperatorRunning` says which).
        public var port: Int

        /// - Parameters:
        ///   - host: the address to bind (loopback keeps the endpoints on this machine).
        ///   - port: the port, 0 for any free one.
        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }
    }
    /// The longest a graceful shutdown waits for in-flight requests (held long-polls are answered
    /// at once); then they are cut off. Default 15 s.
    public var maxShutdown: Duration = .seconds(15)
    /// The most bytes of push bodies the node holds at once; a push past it gets 503 with
    /// `Retry-After`. One tenant holds at most a quarter of it (at least one whole push), so
    /// one tenant's pushes never hold up another's. Default 128 MiB.
    public var maxBodyBytesInFlight: Int = 128 << 20
    /// Where requests and errors are logged (never values or tokens).
    public var logger: Logger
    let metrics: HubMetrics
    let notifier: HubNotifier
    /// Each tenant's share of this node's requests for events by identity.
    let readLimit = TenantReadLimit()

    /// What `/metrics` serves (the backend's text format), or `nil`: 404. `chronicle hub serve`
    /// sets it to its Prometheus registry's output.
    public var metricsText: (@Sendable () -> [UInt8])?

    /// A node serving the tenants of `database`.
    /// - Parameters:
    ///   - database: the hub's database.
    ///   - logger: where requests and errors are logged.
    ///   - metrics: the swift-metrics backend the node records to (default: the process's,
    ///     `MetricsSystem.factory`).
    public init(database: HubDatabase, logger: Logger = Logger(label: "chronicle.hub"), metrics: any MetricsFactory = MetricsSystem.factory) {
        self.init(database: database, logger: logger, metrics: HubMetrics(factory: metrics))
    }

    /// A node serving the tenants of `database` that records to a Prometheus registry, each
    /// family with its help text and type (what `chronicle hub serve` does).
    /// - Parameters:
    ///   - database: the hub's database.
    ///   - logger: where requests and errors are logged.
    ///   - registry: where the node registers its metric families.
    public init(database: HubDatabase, logger: Logger = Logger(label: "chronicle.hub"), registry: PrometheusCollectorRegistry) {
        self.init(database: database, logger: logger, metrics: HubMetrics(registry: registry, poolSize: database.poolSize))
    }

    private init(database: HubDatabase, logger: Logger, metrics: HubMetrics) {
        self.database = database
        self.logger = logger
        self.metrics = metrics
        database.metrics.withLock { $0 = metrics }
        notifier = HubNotifier(logger: logger)
    }

    /// Runs the node (its database pool and its notification listener included) until the task
    /// is cancelled or, with `gracefulShutdownSignals`, until SIGINT/SIGTERM; in-flight requests
    /// finish first, and long-polls held then are answered at once.
    ///
    /// - Parameters:
    ///   - host: The address to bind, for example `127.0.0.1`.
    ///   - port: The port (0 picks a free one; `onRunning` says which).
    ///   - tls: Serve HTTPS with this certificate and key (TLS 1.2 and 1.3, forward-secret suites only).
    ///   - onRunning: Called with the bound port once the node accepts connections.
    ///   - onOperatorRunning: Called with the bound port of ``operatorEndpoint``.
    public func run(
        host: String, port: Int, tls: ServerTLS? = nil, gracefulShutdownSignals: Bool = false,
        onRunning: @escaping @Sendable (Int) async -> Void = { _ in },
        onOperatorRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) async throws {
        let connections = ConnectionGuard(
            maxPerClient: maxConnectionsPerAddress, maxUnauthenticated: maxUnauthenticatedConnections ?? max(1, maxConnections / 4),
            maxPerOwner: max(1, maxConnections / 2), headTimeout: requestHeadTimeout, grace: connectionGrace)
        let app = Application(
            router: makeRouter(connections: connections),
            server: try ServerTLS.serverBuilder(idleTimeout: idleTimeout, connections: connections, tls: tls),
            configuration: .init(
                address: .hostname(host, port: port), serverName: "chronicle-hub",
                availableConnectionsDelegate: .maximum(maxConnections, logger: logger)),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) },
            logger: logger)
        let database = self.database
        let notifier = self.notifier
        let operatorApp = operatorEndpoint.map { endpoint in
            Application(
                router: makeOperatorRouter(),
                configuration: .init(address: .hostname(endpoint.host, port: endpoint.port), serverName: "chronicle-hub-operator"),
                onServerRunning: { channel in await onOperatorRunning(channel.localAddress?.port ?? endpoint.port) },
                logger: logger)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await database.run() }
            group.addTask { await notifier.listen(database) }
            if gracefulShutdownSignals {
                // Shut down last to first: the drain first answers every held long-poll (and any
                // that arrives meanwhile) at once, so the server's own graceful shutdown, which
                // lets in-flight requests finish, does not wait out their waits; /healthz and
                // /metrics answer until the public port has closed.
                // A request that keeps it from stopping (a push whose body trickles in) is cut
                // off after `maxShutdown`: a deploy never waits on one device.
                let services: [any Service] = (operatorApp.map { [$0] } ?? []) + [app, LongPollDrain(notifier: notifier)]
                var configuration = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
                configuration.maximumGracefulShutdownDuration = maxShutdown
                configuration.maximumCancellationDuration = .seconds(5)
                try await ServiceGroup(configuration: configuration).run()
            } else {
                if let operatorApp { group.addTask { try await operatorApp.run() } }
                try await app.run()
            }
            database.willStop()
            group.cancelAll()
        }
    }

    /// `/healthz` and `/metrics`, for ``operatorEndpoint`` only.
    func makeOperatorRouter() -> Router<BasicRequestContext> {
        let router = Router()
        let database = self.database
        let metrics = self.metrics
        let notifier = self.notifier
        let logger = self.logger
        let metricsText = self.metricsText
        router.get("healthz") { _, _ -> Response in
            do {
                try await database.client.query("SELECT 1", logger: logger)
                return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "ok\n")))
            } catch {
                return Response(status: .serviceUnavailable, body: .init(byteBuffer: ByteBuffer(string: "the database does not answer\n")))
            }
        }

        router.get("metrics") { _, _ -> Response in
            metrics.set(.longPollsWaiting, notifier.waiting)
            // The database's connections by state, read at the scrape (a failure leaves the last).
            if let states = try? await database.connectionStates() {
                for state in HubMetrics.connectionStates { metrics.set(.databaseConnections, states[state] ?? 0, labels: [("state", state)]) }
            }
            guard let text = metricsText?() else {
                return Response(status: .notFound, body: .init(byteBuffer: ByteBuffer(string: "no metrics backend\n")))
            }
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: text)))
        }
        return router
    }

    func makeRouter(connections: ConnectionGuard? = nil) -> Router<SyncContext<HubBackend.Caller>> {
        let router = Router(context: SyncContext<HubBackend.Caller>.self)
        router.add(middleware: AccessLogMiddleware(logger: logger))
        router.add(middleware: HubErrorMiddleware(metrics: metrics, logger: logger))
        let backend = HubBackend(
            database: database, metrics: metrics, notifier: notifier, readLimit: readLimit, maxWait: Int(maxWait.components.seconds))
        SyncRoutes.install(
            on: router, backend: backend, refusal: HubBackend.refusal, maxBodySize: maxBodySize,
            budget: BodyBudget(capacity: maxBodyBytesInFlight, share: max(maxBodyBytesInFlight / 4, maxBodySize), minimumRate: minimumBodyRate,
                onReserved: onBodyBytesReserved),
            connections: connections, logger: logger)
        return router
    }
}

/// The protocol served from the hub's database: a token stands for a tenant's device (looked up
/// on every request, so a revoked token is refused on every node at once), and a pull may be a
/// long-poll.
struct HubBackend: SyncBackend {
    /// The device a token authenticated, and the token (checked again after a long-poll's wait).
    struct Caller: Sendable {
        var device: HubDevice
        var token: String
    }

    let database: HubDatabase
    let metrics: HubMetrics
    let notifier: HubNotifier
    let readLimit: TenantReadLimit
    /// The longest a long-poll is held, in seconds.
    let maxWait: Int
    /// What a refused token is told, at the start of a request or after a long-poll's wait.
    static let refusal = "missing, unknown or revoked bearer token"

    func caller(presenting token: String) async throws -> Caller? {
        try await database.device(token: token).map { Caller(device: $0, token: token) }
    }

    func info(for caller: Caller) async throws -> WireInfo {
        try await database.reads.info(device: caller.device)
    }

    func range(for caller: Caller, _ query: RangeQuery) async throws -> [UInt8] {
        let device = caller.device
        let wait = min(query.wait, maxWait)
        let generation = notifier.generation(device.tenant)
        var result = try await database.reads.range(
            device: device, after: query.after, filter: query.filter, excluding: query.excluding?.bytes, maxEvents: query.maxEvents)
        if wait > 0, result.upTo == query.after {
            // Nothing new: hold the request until any node appends for this tenant. The token
            // may be revoked while the request is held: reading the range again asks (401).
            await notifier.wait(for: device.tenant, past: generation, timeout: .seconds(wait))
            result = try await database.reads.range(
                device: device, after: query.after, filter: query.filter, excluding: query.excluding?.bytes, maxEvents: query.maxEvents)
        }
        metrics.count(.eventsServed, by: Int64(result.events))
        metrics.count(.servedBytes, by: Int64(result.bytes.count))
        return result.bytes
    }

    func events(for caller: Caller, _ identities: [EventIdentity]) async throws -> (range: [UInt8], whole: [Bool]) {
        let result = try await readLimit.run(tenant: caller.device.tenant) { try await database.reads.events(device: caller.device, identities) }
        metrics.count(.eventsServed, by: Int64(result.events))
        metrics.count(.servedBytes, by: Int64(result.bytes.count))
        return (result.bytes, result.whole)
    }

    /// Each tenant's pushes take one share of the node's body budget.
    func bodyOwner(_ caller: Caller, client: String) -> String { "tenant \(caller.device.tenant)" }

    /// Each tenant's devices hold at most a share of the node's connections.
    func connectionOwner(_ caller: Caller) -> String { "tenant \(caller.device.tenant)" }

    func push(_ body: [UInt8], filter: RangeFilter?, from caller: Caller, client: String) async throws -> RangeReceipt {
        // Decoded in the tenant's turn (``HubDatabase/append(_:device:)``): a tenant's queue of
        // pushes holds bytes, not decoded ranges.
        metrics.count(.pushedBytes, by: Int64(body.count))
        let receipt = try await database.appends.append(body, filter: filter, device: caller.device)
        metrics.count(.eventsAppended, by: Int64(receipt.applied))
        return receipt
    }
}

/// At a graceful shutdown, answers the node's long-polls at once (each with what it has: the
/// device asks again, through another node).
struct LongPollDrain: Service {
    let notifier: HubNotifier

    func run() async throws {
        try await gracefulShutdown()
        notifier.shutDown()
    }
}

/// Turns refusals into their statuses, a lost database into 503, and counts every request by
/// route and status class, with how long it took.
struct HubErrorMiddleware: RouterMiddleware {
    typealias Context = SyncContext<HubBackend.Caller>
    let metrics: HubMetrics
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        var status = 500
        defer {
            let labels = [("route", Self.route(of: request)), ("status", "\(status / 100)xx")]
            metrics.count(.requests, labels)
            metrics.observe(.requestDuration, labels, ContinuousClock.now - start)
        }
        do {
            let response = try await next(request, context)
            status = response.status.code
            return response
        } catch let refusal as HubRefusal {
            metrics.count(.refusals)
            if case let .quotaExceeded(_, quota) = refusal { metrics.count(.quotaRefusals, [("reason", quota)]) }
            let error = refusal.httpError
            status = error.status.code
            throw error
        } catch let error as ChronicleError {
            metrics.count(.refusals)
            if case .malformedInput = error {
                status = 400
                throw HTTPError(.badRequest, message: error.description)
            }
            throw error
        } catch let error as HTTPError {
            status = error.status.code
            if error.status == .badRequest { metrics.count(.refusals) }  // a malformed query
            throw error
        } catch is CancellationError {
            status = 503
            throw CancellationError()  // the node is stopping: not the database's failure
        } catch where HubDatabase.describe(error) == nil {
            // Not the database's (a client that closed its connection mid-body, say): no 503, no
            // database alert, nothing at error level a device could fill the log with.
            logger.notice("chronicle hub: a request failed", metadata: ["path": "\(request.uri.path)", "error": "\(error)"])
            status = 400
            throw HTTPError(.badRequest, message: "the request could not be read")
        } catch {
            // PSQLError, a failed COMMIT (PostgresTransactionError), the pool giving up on
            // connecting (its circuit breaker): the database, not the request.
            metrics.count(.databaseErrors)
            status = 503
            logger.error("chronicle hub: the database failed a request", metadata: ["error": "\(String(reflecting: error))"])
            throw HTTPError(.serviceUnavailable, message: "the hub's database is unavailable; retry")
        }
    }

    /// The route a request took, as a label: a handful of values, whatever the path.
    static func route(of request: Request) -> String {
        switch (request.method, request.uri.path) {
        case (.get, "/v1/info"): "info"
        case (.get, "/v1/range"): (Int(request.uri.queryParameters["wait"].map(String.init) ?? "") ?? 0) > 0 ? "range_wait" : "range"
        case (.post, "/v1/range"): "push"
        case (.post, "/v1/events"): "events"
        default: "other"
        }
    }
}
