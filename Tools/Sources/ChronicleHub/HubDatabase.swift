@_spi(Wire) public import ChronicleFormat
import Foundation
public import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// The hub's state in PostgreSQL: tenants, device tokens (hashed), each tenant's log of event
/// items as received, and the wrapped keys devices pushed. Hub processes hold nothing else, so
/// any number of them serve the same tenants.
///
/// Schema (`migrate()`; docs/FORMAT.md, section 13):
///
/// ```
/// tenants(id, name UNIQUE, relay_id 16 B, epoch 16 B, head, chain 32 B, event_count, byte_count,
///         max_events, max_bytes)
/// devices(tenant_id, name, token_hash 32 B UNIQUE, created, last_seen, pushed, pulled)
/// events(tenant_id, position, writer 16 B, counter, policy (-1 newer format), payload_size, body, chain,
///        key (domain ‖ length ‖ name), hlc, device, also_pushed_by, PRIMARY KEY (tenant_id, position),
///        UNIQUE (tenant_id, writer, counter, sha256(body)))
/// wrapped_keys(tenant_id, digest 32 B, body, key_id 16 B, device, arrival)
/// tenants.retain_revisions: revisions of a key each device's pushes keep (NULL: 100, 0: all);
/// tenants.appended_since_trim: events appended since a node last started a trim of the tenant
/// tenants.sweep_from: where a trim's walk over every key stands (NULL: none due)
/// trim_pending(tenant_id, key, marks): the keys appended or vouched for since their last trim
/// ```
///
/// Positions are a tenant's own sequence, numbered inside the appending transaction while it
/// holds the tenant's row lock: appends of one tenant are serialized and commit in position
/// order, so a puller at position N never misses an event that commits later below N.
public final class HubDatabase: Sendable {
    /// The pooled client (run by ``run()``).
    let client: PostgresClient
    let configuration: PostgresClient.Configuration
    /// Where the URL points, for a direct connection and for messages.
    let target: Target
    let logger: Logger

    /// Items one pull scans at most (the filters may pass over many).
    static let scanLimit = 4_096
    /// About how many bytes of events one pull returns at most.
    static let pullBytes = 1 << 20
    /// The longest the statement answering a request for events by identity may run (PostgreSQL's
    /// `statement_timeout`, set for that transaction only): past it the request gets 503.
    static let eventRequestTimeoutMilliseconds = 5_000
    /// The most bodies of one identity an answer to a request by identity carries (each pushing
    /// device's smallest first; docs/FORMAT.md 7.6): a member needs the genuine one, which the
    /// device that wrote it pushed.
    static let versionsPerIdentity = 8
    /// The channel the hub's nodes notify on: the payload is the tenant id.
    static let channel = "chronicle_hub"
    /// The most tokens a node remembers (``device(token:)``).
    static let maxRememberedTokens = 100_000
    /// Tokens this node has served, by digest.
    let tokens = Mutex<[[UInt8]: HubDevice]>([:])
    /// The most wrapped keys a tenant holds.
    static let maxKeys: Int64 = 1_024
    /// The most wrapped keys one device's pushes store (a device has a key or two, and one more
    /// per rotation): no token can fill its tenant's table. `chronicle hub keys drop` frees them.
    static let maxKeysPerDevice: Int64 = 64
    /// Appends waiting on this node, per tenant: they serialize on the tenant's row lock anyway,
    /// so they wait here rather than each holding one of the pool's connections (one tenant's
    /// queue would otherwise take every connection and stall every other tenant on the node),
    /// and whoever's turn it is commits the waiting ones with its own.
    let appendQueue = AppendQueue()
    /// The most connections a node's pool opens unless told otherwise (``init(url:poolSize:logger:)``).
    public static let defaultPoolSize = 40
    /// The most connections this node's pool opens.
    public let poolSize: Int
    /// The trims this node runs, by tenant.
    let trims = Mutex<[Int64: Task<Void, Never>]>([:])
    /// Where the node serving this database records trims and token lookups (set by `HubNode`).
    let metrics = Mutex<HubMetrics?>(nil)

    /// A database at a PostgreSQL URL: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require]`.
    ///
    /// - Parameter poolSize: The most connections the pool opens (1…10,000): every node's pool
    ///   together must fit the server's `max_connections` with room for the operator.
    /// - Throws: ``ChronicleError/invalidArgument(_:)`` when the URL is not one, or the pool size is out of range.
    public init(url: String, poolSize: Int = HubDatabase.defaultPoolSize, logger: Logger = Logger(label: "chronicle.hub")) throws(ChronicleError) {
        guard (1...10_000).contains(poolSize) else {
            throw .invalidArgument("the database pool holds 1...10000 connections, not \(poolSize)")
        }
        target = try Target(url: url)
        self.poolSize = poolSize
        configuration = target.clientConfiguration(poolSize: poolSize)
        // The pool logs why it cannot connect (login refused, no TLS, too many connections) here:
        // the cause an operator needs when requests start failing with 503.
        client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.logger = logger
    }

    /// Runs the connection pool until the task is cancelled; every other call needs it running.
    public func run() async {
        running.withLock { $0 = true }
        await withTaskCancellationHandler {
            await client.run()
        } onCancel: {
            stopping.withLock { $0 = true }
        }
    }

    /// Whether ``run()`` was called (the pool marks itself running as the call begins).
    private let running = Mutex(false)
    /// Whether ``run()`` was cancelled: the pool is closing its connections.
    private let stopping = Mutex(false)

    /// Whether the pool is shutting down (a connection it closes is not a lost database).
    var isStopping: Bool { stopping.withLock { $0 } }

    /// Says the pool is about to stop, before its task is cancelled: the tasks beside it then
    /// take the connections it closes for the shutdown they are.
    func willStop() {
        stopping.withLock { $0 = true }
    }

    /// Returns once ``run()`` has begun. Call it before the first query of a task started beside
    /// ``run()``: the pool answers a lease asked for before it runs, but with a warning in the log.
    public func untilRunning() async {
        while !running.withLock({ $0 }) && !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
        // `run()` marks the pool running before its first suspension: a moment after the flag.
        try? await Task.sleep(for: .milliseconds(10))
    }

    /// A PostgreSQL URL taken apart.
    struct Target: Sendable {
        enum Mode: Sendable { case disable, prefer, require }
        var host: String
        var port: Int
        var user: String
        var password: String?
        var database: String?
        var mode: Mode

        init(url text: String) throws(ChronicleError) {
            guard let url = URLComponents(string: text), ["postgres", "postgresql"].contains(url.scheme ?? ""),
                let host = url.host, !host.isEmpty, let user = url.user, !user.isEmpty
            else {
                throw .invalidArgument("the database must be a URL like postgres://USER:PASSWORD@HOST:5432/DATABASE")
            }
            let database = url.path.hasPrefix("/") ? String(url.path.dropFirst()) : url.path
            switch url.queryItems?.first(where: { $0.name == "sslmode" })?.value ?? "prefer" {
            case "disable": mode = .disable
            case "prefer", "allow": mode = .prefer
            case "require", "verify-full", "verify-ca": mode = .require
            default: throw .invalidArgument("sslmode is disable, prefer or require")
            }
            (self.host, port, self.user, password) = (host, url.port ?? 5432, user, url.password)
            self.database = database.isEmpty ? nil : database
        }

        func clientConfiguration(poolSize: Int) -> PostgresClient.Configuration {
            let tls: PostgresClient.Configuration.TLS = switch mode {
            case .disable: .disable
            case .prefer: .prefer(.makeClientConfiguration())
            case .require: .require(.makeClientConfiguration())
            }
            var configuration = PostgresClient.Configuration(host: host, port: port, username: user, password: password, database: database, tls: tls)
            configuration.options.maximumConnections = poolSize
            return configuration
        }

        func connectionTLS() throws -> PostgresConnection.Configuration.TLS {
            switch mode {
            case .disable: .disable
            case .prefer: .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
            case .require: .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            }
        }
    }

    /// Runs `body` in a transaction; what `body` throws comes out as itself (a refusal stays a
    /// refusal), not wrapped in the driver's transaction error.
    func transaction<Result: Sendable>(_ body: (PostgresConnection) async throws -> Result) async throws -> Result {
        do {
            return try await client.withTransaction(logger: logger) { connection in try await body(connection) }
        } catch let error as PostgresTransactionError {
            // A failed COMMIT is a database failure like any other (503, retry), not a 500.
            if let inner = error.closureError ?? error.beginError ?? error.commitError { throw inner }
            throw error
        }
    }
}

/// A device authenticated by its token.
struct HubDevice: Sendable, Equatable {
    var tenant: Int64
    var name: String
    /// The digest of the token it presented (what `devices.token_hash` holds).
    var tokenHash: [UInt8]
}

/// An event identity as a set member.
struct IdentityKey: Hashable {
    var writer: [UInt8]
    var counter: Int64
}
