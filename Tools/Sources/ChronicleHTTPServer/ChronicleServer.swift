@_spi(Wire) public import Chronicle
public import Foundation
import Hummingbird
package import HummingbirdCore
import HummingbirdTLS
public import Logging
import NIOCore
import NIOPosix
import NIOSSL

/// Serves a store's log to replicas over HTTP (`chronicle serve`).
///
/// Endpoints, all under `/v1`, all requiring `Authorization: Bearer <token>`:
///
/// | method | path | request | response |
/// |---|---|---|---|
/// | GET | `/v1/info` | — | JSON ``ReplicaInfo`` |
/// | GET | `/v1/range?after=N&filter=syncable\|small:BYTES&exclude=HEX&max=EVENTS` | — | a range (binary; at most `max` ≤ 4,096 events and about 1 MiB) |
/// | POST | `/v1/range` | a range (binary) | JSON ``RangeReceipt``, after the durable commit |
///
/// A missing or wrong token gets 401 and touches nothing; a malformed range
/// gets 400 and applies nothing; a body over the limit gets 413 before it is
/// read whole.
public struct ChronicleServer: Sendable {
    /// A certificate and private key for HTTPS.
    public struct TLS: Sendable {
        /// PEM file with the certificate chain.
        public var certificateChain: URL
        /// PEM file with the private key.
        public var privateKey: URL

        /// Creates a TLS setting from PEM files.
        public init(certificateChain: URL, privateKey: URL) {
            self.certificateChain = certificateChain
            self.privateKey = privateKey
        }
    }

    /// The store served.
    public let store: Store
    let token: [UInt8]
    /// The largest push body accepted, in bytes. Default 80 MiB.
    public var maxBodySize: Int = 80 << 20
    /// How long a connection may stay idle before the server closes it. Default 60 s.
    public var idleTimeout: Duration = .seconds(60)
    /// The most connections served at once; more wait until one closes. Default 256.
    public var maxConnections: Int = 256
    /// The most connections one client address may hold at once, checked before any request is
    /// read (0: no limit, for a server behind a proxy). Default 32.
    public var maxConnectionsPerAddress: Int = 32
    /// The most bytes of push bodies held at once across every connection; a push past it gets
    /// 503 with `Retry-After`. Importing a range takes several times its size. Default 160 MiB.
    public var maxBodyBytesInFlight: Int = 160 << 20
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
        let serverBuilder = try Self.serverBuilder(idleTimeout: idleTimeout, maxConnectionsPerAddress: maxConnectionsPerAddress, tls: tls)
        let app = Application(
            router: makeRouter(),
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

    /// HTTP/1.1, or HTTPS with `tls`, as both servers speak it: connections idle for
    /// `idleTimeout` are closed, one address holds at most `maxConnectionsPerAddress` (0: any
    /// number), TLS is 1.2 or 1.3 with forward-secret AEAD suites only.
    package static func serverBuilder(idleTimeout: Duration, maxConnectionsPerAddress: Int, tls: TLS?) throws -> HTTPServerBuilder {
        // An idle connection is closed after `idleTimeout`, so a client that opens connections and
        // sends nothing cannot hold them forever.
        let perAddress = ConnectionsPerAddress(limit: maxConnectionsPerAddress)
        let idle = TimeAmount.nanoseconds(Int64(idleTimeout.components.seconds) * 1_000_000_000 + idleTimeout.components.attoseconds / 1_000_000_000)
        let http1 = HTTPServerBuilder.http1(configuration: .init(additionalChannelHandlers: perAddress.handlers(), idleTimeout: idle))
        guard let tls else { return http1 }
        let chain = try loading("the TLS certificate chain", tls.certificateChain) {
            try NIOSSLCertificate.fromPEMFile(tls.certificateChain.path).map { NIOSSLCertificateSource.certificate($0) }
        }
        let key = try loading("the TLS private key", tls.privateKey) { try NIOSSLPrivateKey(file: tls.privateKey.path, format: .pem) }
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
        configuration.minimumTLSVersion = .tlsv12  // TLS 1.0 and 1.1 are broken and deprecated (RFC 8996)
        // TLS 1.2 only with forward secrecy and AEAD (every TLS 1.3 suite has both).
        configuration.cipherSuites = Self.tls12CipherSuites
        return try .tls(http1, tlsConfiguration: configuration)
    }

    /// Loads a PEM file, or says which file could not be loaded and why (NIOSSL's
    /// `failedToLoadCertificate` names neither).
    private static func loading<T>(_ what: String, _ file: URL, _ load: () throws -> T) throws -> T {
        guard FileManager.default.isReadableFile(atPath: file.path) else {
            let exists = FileManager.default.fileExists(atPath: file.path)
            throw ChronicleError.invalidArgument("cannot load \(what) from \(file.path): \(exists ? "it is not readable by this user" : "no such file")")
        }
        do {
            return try load()
        } catch {
            throw ChronicleError.invalidArgument("cannot load \(what) from \(file.path): it is not a PEM file of that kind (\(error))")
        }
    }

    /// The TLS 1.2 suites served: ECDHE key exchange and an AEAD cipher only.
    static let tls12CipherSuites = [
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    ].joined(separator: ":")

    func makeRouter() -> Router<SyncContext<StoreBackend.Caller>> {
        let router = Router(context: SyncContext<StoreBackend.Caller>.self)
        router.add(middleware: AccessLogMiddleware(logger: logger))
        SyncRoutes.install(
            on: router, backend: StoreBackend(store: store, token: BearerTokenCheck(token: token)),
            refusal: "missing or wrong bearer token", maxBodySize: maxBodySize, budget: BodyBudget(capacity: maxBodyBytesInFlight), logger: logger)
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

    func push(_ body: [UInt8], from caller: Caller) async throws -> RangeReceipt {
        let (store, data) = (store, Data(body))
        // On the imports' own thread: a push may run Argon2id for the keys it brings.
        return try await importing { try store.importRange(data, from: "HTTP push") }
    }
}

/// Runs blocking store work (a durable commit may fsync) on NIO's blocking thread pool,
/// off the event loops and off Swift's cooperative pool.
func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await NIOThreadPool.singleton.runIfActive { try work() }
}

/// Runs an import on a thread of its own, one at a time: an import that derives keys (Argon2id,
/// up to a second each) never takes a thread that serves pulls and info requests, and imports of
/// one store serialize on its write lock anyway.
func importing<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        importQueue.async { continuation.resume(with: Result { try work() }) }
    }
}

private let importQueue = DispatchQueue(label: "chronicle.serve.imports", qos: .utility)


extension ChronicleServer: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The store served; never the token.
    public var description: String { "ChronicleServer(\(store.directory.path), token: <redacted>)" }
    /// The same as ``description``: nothing secret.
    public var debugDescription: String { description }
    /// A mirror without the token (`dump` and the debugger).
    public var customMirror: Mirror { Mirror(self, children: ["store": store.directory.path, "maxBodySize": maxBodySize], displayStyle: .struct) }
}
