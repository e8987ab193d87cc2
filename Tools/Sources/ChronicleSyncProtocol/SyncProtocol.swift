@_spi(Wire) package import ChronicleFormat
import Foundation
package import Hummingbird
package import HummingbirdCore
package import Logging
import NIOCore

// The sync protocol over HTTP (FORMAT.md, section 8), written once: `chronicle serve` and a hub
// node differ only in who a token stands for and where info, ranges and pushes go.

/// A pull, as a request asks for it: parsed and bounded here, for every server.
package struct RangeQuery: Sendable {
    package var after: UInt64
    package var filter: RangeFilter
    /// The replica whose events to leave out (the asking device's writer).
    package var excluding: ReplicaID?
    package var maxEvents: Int
    /// Seconds to hold the request when nothing is new (0: answer at once); a server bounds it.
    package var wait: Int

    /// Reads `after=N&filter=…&exclude=HEX&max=EVENTS&wait=SECONDS`; 400 for anything malformed.
    package init(_ query: FlatDictionary<Substring, Substring>) throws {
        guard let after = WireFormat.sequence(query.get("after")) else {
            throw HTTPError(.badRequest, message: "after=N is required: an unsigned decimal that fits 64 bits")
        }
        guard let filter = WireFormat.filter(query.get("filter")) else { throw HTTPError(.badRequest, message: "filter is syncable or small:BYTES") }
        var excluding: ReplicaID?
        if let hex = query.get("exclude") {
            guard let id = ReplicaID(hex: hex) else { throw HTTPError(.badRequest, message: "exclude must be a replica id (32 hex digits)") }
            excluding = id
        }
        guard let maxEvents = WireFormat.maxEvents(query.get("max")) else {
            throw HTTPError(.badRequest, message: "max is a number of events (1 to 4096)")
        }
        if let text = query.get("wait"), Int(text) == nil { throw HTTPError(.badRequest, message: "wait is a number of seconds") }
        self.after = after
        self.filter = filter
        self.excluding = excluding
        self.maxEvents = maxEvents
        wait = max(query.get("wait", as: Int.self) ?? 0, 0)
    }
}

/// What answers the protocol's requests: one store (`chronicle serve`) or the hub's tenants.
package protocol SyncBackend: Sendable {
    /// Who a token stands for (nothing for a store's one token; a tenant's device at the hub).
    associatedtype Caller: Sendable
    associatedtype Info: Encodable
    associatedtype Receipt: Encodable

    /// The caller `token` stands for; `nil`: refused with 401, touching nothing.
    func caller(presenting token: String) async throws -> Caller?
    /// What `GET /v1/info` answers.
    func info(for caller: Caller) async throws -> Info
    /// The encoded range `GET /v1/range` answers.
    func range(for caller: Caller, _ query: RangeQuery) async throws -> [UInt8]
    /// Applies a pushed range; what `POST /v1/range` answers once it is durable.
    /// `filter` is the filter the pusher exported it with (`?filter=`; `nil` when it did not say);
    /// `client` is the connection's client (``ConnectionGuard/client(_:)``).
    func push(_ body: [UInt8], filter: RangeFilter?, from caller: Caller, client: String) async throws -> Receipt
    /// The encoded range of events with these identities (at most
    /// ``EventIdentity/maxPerRequest``) that `POST /v1/events` answers, and for each distinct
    /// identity whether it was answered whole (the `Chronicle-Answered-Whole` header).
    func events(for caller: Caller, _ identities: [EventIdentity]) async throws -> (range: [UInt8], whole: [Bool])
    /// Whose share of the body budget a caller's push takes (``BodyBudget``), `client` being
    /// its connection's client (``ConnectionGuard/client(_:)``).
    func bodyOwner(_ caller: Caller, client: String) -> String
    /// Whose share of the connections a caller's connection takes (``ConnectionGuard/maxPerOwner``).
    func connectionOwner(_ caller: Caller) -> String
}

/// A request's context: the caller its bearer token stands for.
package struct SyncContext<Caller: Sendable>: RequestContext {
    package var coreContext: CoreRequestContextStorage
    /// Set by the token check before any route runs.
    package var caller: Caller?
    /// The connection the request came on (``ConnectionGuard/authenticated(_:owner:)``).
    package let connection: ObjectIdentifier
    /// Who the connection counts against (``ConnectionGuard/client(_:)``).
    package let client: String

    package init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        connection = ObjectIdentifier(source.channel)
        client = source.channel.remoteAddress.map(ConnectionGuard.client) ?? "unknown"
    }

    /// The caller, or 401 (a route reached without the token check: never, by construction).
    package func requireCaller() throws -> Caller {
        guard let caller else { throw HTTPError(.unauthorized, message: "missing or wrong bearer token") }
        return caller
    }
}

/// Resolves `Authorization: Bearer <token>` on every request; 401 with `WWW-Authenticate`
/// otherwise, logged (never the token), touching nothing.
package struct SyncTokenMiddleware<Backend: SyncBackend>: RouterMiddleware {
    package typealias Context = SyncContext<Backend.Caller>
    package let backend: Backend
    package let refusal: String
    package let connections: ConnectionGuard?
    package let logger: Logger

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let header = request.headers[.authorization] ?? ""
        let prefix = "Bearer "
        var context = context
        if header.hasPrefix(prefix), header.utf8.count <= 1_024 {
            context.caller = try await backend.caller(presenting: String(header.dropFirst(prefix.count)))
        }
        if let caller = context.caller, let connections, !connections.authenticated(context.connection, owner: backend.connectionOwner(caller)) {
            var headers = HTTPFields()
            headers[.retryAfter] = "1"
            headers[.connection] = "close"
            return Response(
                status: .serviceUnavailable, headers: headers,
                body: .init(byteBuffer: ByteBuffer(string: "{\"error\":{\"message\":\"this tenant's devices hold their share of the server's connections; retry\"}}")))
        }
        guard context.caller != nil else {
            logger.notice("chronicle: refused a request with a \(refusal)", metadata: ["path": "\(request.uri.path)"])
            var headers = HTTPFields()
            headers[.wwwAuthenticate] = "Bearer"
            return Response(status: .unauthorized, headers: headers, body: .init(byteBuffer: ByteBuffer(string: "\(refusal)\n")))
        }
        return try await next(request, context)
    }
}

package enum SyncRoutes {
    /// The largest request for events by identity (``EventIdentity/maxPerRequest`` of them).
    static let maxEventRequestSize = 3 + 24 * EventIdentity.maxPerRequest

    /// Adds `/v1/info`, `GET /v1/range`, `POST /v1/range` and `POST /v1/events` to `router`,
    /// behind the token check.
    /// - Parameters:
    ///   - refusal: what a 401 says (`missing or wrong bearer token`).
    ///   - maxBodySize: the largest push body (413 past it, before it is read whole).
    ///   - budget: the push bodies held at once, across connections (503 past it).
    ///   - connections: told which connections present an accepted token.
    package static func install<Backend: SyncBackend>(
        on router: Router<SyncContext<Backend.Caller>>, backend: Backend, refusal: String,
        maxBodySize: Int, budget: BodyBudget, connections: ConnectionGuard?, logger: Logger
    ) {
        let v1 = router.group("v1").add(
            middleware: SyncTokenMiddleware(backend: backend, refusal: refusal, connections: connections, logger: logger))
        v1.get("info") { _, context -> Response in
            try jsonResponse(try await backend.info(for: try context.requireCaller()))
        }
        v1.get("range") { request, context -> Response in
            let caller = try context.requireCaller()
            let bytes = try await backend.range(for: caller, try RangeQuery(request.uri.queryParameters))
            var headers = HTTPFields()
            headers[.contentType] = WireFormat.rangeMediaType
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        }
        v1.post("events") { request, context -> Response in
            let caller = try context.requireCaller()
            return try await budget.withBody(of: request, limit: maxEventRequestSize, owner: backend.bodyOwner(caller, client: context.client)) { body in
                let identities: [EventIdentity]
                do {
                    identities = try EventIdentity.decodeRequest(Array(body.readableBytesView))
                } catch {
                    throw HTTPError(.badRequest, message: "\(error)")
                }
                var headers = HTTPFields()
                headers[.contentType] = WireFormat.rangeMediaType
                let (bytes, whole) = try await backend.events(for: caller, identities)
                // Safe: the name is a constant token of letters and hyphens, which a field name accepts.
                headers[.init(EventAnswer.headerName)!] = EventAnswer.encodeWhole(whole)
                return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
            }
        }
        v1.post("range") { request, context -> Response in
            let caller = try context.requireCaller()
            // The filter the range was exported with, when the pusher says (a hub keeps push marks by it).
            let filterText = request.uri.queryParameters["filter"].map(String.init)
            let filter = filterText.flatMap { WireFormat.filter($0) }
            guard filterText == nil || filter != nil else { throw HTTPError(.badRequest, message: "filter must be `syncable` or `small:BYTES`") }
            return try await budget.withBody(of: request, limit: maxBodySize, owner: backend.bodyOwner(caller, client: context.client)) { body in
                do {
                    return try jsonResponse(try await backend.push(Array(body.readableBytesView), filter: filter, from: caller, client: context.client))
                } catch let error as ChronicleError {
                    // A range that does not decode or verify: nothing of it was applied.
                    guard case .malformedInput = error else { throw error }
                    logger.warning("chronicle: refused a malformed range", metadata: ["error": "\(error)"])
                    throw HTTPError(.badRequest, message: error.description)
                }
            }
        }
    }
}

/// A 200 response with `value` as JSON.
package func jsonResponse<T: Encodable>(_ value: T) throws -> Response {
    var headers = HTTPFields()
    headers[.contentType] = "application/json"
    return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: try JSONEncoder().encode(value))))
}
