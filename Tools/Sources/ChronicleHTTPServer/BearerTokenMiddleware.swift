import ChronicleHTTP
import Hummingbird
import Logging
import NIOCore

/// Checks `Authorization: Bearer <token>` on every request, in constant time.
///
/// The presented token and the expected one are compared as BLAKE2b digests
/// with libsodium's constant-time comparison, so the time taken says nothing
/// about either token, its length included.
struct BearerTokenMiddleware: RouterMiddleware {
    typealias Context = BasicRequestContext
    private let digest: [UInt8]
    private let isEmpty: Bool
    let logger: Logger

    init(token: [UInt8], logger: Logger) {
        digest = BearerToken.digest(token)
        isEmpty = token.isEmpty
        self.logger = logger
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let header = request.headers[.authorization] ?? ""
        let prefix = "Bearer "
        let presented = header.hasPrefix(prefix) ? Array(header.utf8.dropFirst(prefix.utf8.count)) : []
        guard accepts(presented) else {
            logger.notice("chronicle: refused a request with a missing or wrong token", metadata: ["path": "\(request.uri.path)"])
            var headers = HTTPFields()
            headers[.wwwAuthenticate] = "Bearer"
            return Response(status: .unauthorized, headers: headers, body: .init(byteBuffer: ByteBuffer(string: "missing or wrong bearer token\n")))
        }
        return try await next(request, context)
    }

    /// Whether `presented` is the configured token (an empty configured token accepts nothing).
    func accepts(_ presented: [UInt8]) -> Bool {
        !isEmpty && BearerToken.matches(presented, digest: digest)
    }
}
