@_spi(Wire) import ChronicleFormat
#if HTTPClient
import AsyncHTTPClient
@_spi(Wire) public import Chronicle
public import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL

/// Replicates with a `chronicle serve` over HTTP or HTTPS.
///
/// ```swift
/// let replicator = Replicator(store: store, peers: [.http(URL(string: "https://sync.example.com")!, token: token)])
/// ```
public struct HTTPTransport: SyncTransport, ChangeWaitingTransport {
    /// The server's base URL.
    public let baseURL: URL
    let token: String
    /// A PEM file of certificate authorities to trust (for a self-signed server), or `nil` for the system's.
    public let trustedCertificates: URL?
    /// The longest a request may take.
    public var timeout: Duration = .seconds(60)
    /// The largest response accepted, in bytes.
    public var maxResponseSize: Int = 300 << 20
    /// Allow `http://` to a host other than this machine (the token and the ranges travel in the clear). Default `false`.
    public var allowsInsecureHTTP = false

    /// A transport to `baseURL` authenticating with `token`.
    public init(baseURL: URL, token: String, trustedCertificates: URL? = nil) {
        self.baseURL = baseURL
        self.token = token
        self.trustedCertificates = trustedCertificates
    }

    public func info() async throws -> ReplicaInfo {
        let body = try await send(.GET, path: "v1/info", query: [:], body: nil)
        do {
            return try JSONDecoder().decode(WireInfo.self, from: body).info()
        } catch let error as ChronicleError {
            throw error
        } catch {
            throw ChronicleError.malformedInput("the peer's info does not decode: \(error)")
        }
    }

    public func pull(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) async throws -> Data {
        var query = ["after": String(after), "filter": WireFormat.text(filter), "max": String(maxEvents)]
        if let origin { query["exclude"] = origin.hex }
        return try await send(.GET, path: "v1/range", query: query, body: nil)
    }

    /// Long-polls `GET /v1/range?after=N&max=1&wait=SECONDS` (the hub holds it until another
    /// device pushes; `chronicle serve` answers at once).
    public func waitForChanges(after: UInt64, timeout: Duration) async throws -> Bool {
        let seconds = max(1, min(timeout.components.seconds, 30))
        var transport = self
        transport.timeout = .seconds(seconds + 15)
        let body = try await transport.send(
            .GET, path: "v1/range", query: ["after": String(after), "max": "1", "wait": String(seconds), "filter": "syncable"], body: nil)
        return try RelayRange(decoding: Array(body)).upTo > after
    }

    public func push(_ range: Data) async throws -> RangeReceipt {
        try await push(range, query: [:])
    }

    /// `POST /v1/range?filter=…`: a hub records how far it holds what this filter carries.
    public func push(_ range: Data, filter: RangeFilter) async throws -> RangeReceipt {
        try await push(range, query: ["filter": WireFormat.text(filter)])
    }

    private func push(_ range: Data, query: [String: String]) async throws -> RangeReceipt {
        let body = try await send(.POST, path: "v1/range", query: query, body: range)
        do {
            return try JSONDecoder().decode(RangeReceipt.self, from: body)
        } catch {
            throw ChronicleError.malformedInput("the peer's receipt does not decode: \(error)")
        }
    }

    /// `POST /v1/events` with the identities; `nil` when the server predates the request (404).
    public func pullEvents(_ identities: [EventIdentity]) async throws -> Data? {
        try await answerEvents(identities)?.range
    }

    /// `POST /v1/events` with the identities, and what the server said of the room it had for
    /// each (`Chronicle-Answered-Whole`; a server that does not say answers `nil` there);
    /// `nil` when the server predates the request (404).
    public func answerEvents(_ identities: [EventIdentity]) async throws -> EventAnswer? {
        let asked = EventIdentity.distinct(identities)
        let body = Data(EventIdentity.encodeRequest(asked))
        let (answer, headers) = try await exchange(
            .POST, path: "v1/events", query: [:], body: body, contentType: WireFormat.eventRequestMediaType, notFound: Data())
        guard !answer.isEmpty else { return nil }
        let whole = headers.first(name: EventAnswer.headerName).flatMap { EventAnswer.decodeWhole($0, count: asked.count) }
        return EventAnswer(range: answer, answeredWhole: whole)
    }

    /// TLS 1.2 or newer (1.0 and 1.1 are deprecated, RFC 8996).
    private static let tlsConfiguration: TLSConfiguration = {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        return configuration
    }()

    /// One client for the process: no redirects (a redirect would carry the bearer token and
    /// the ranges elsewhere), TLS 1.2 or newer.
    private static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration(tlsConfiguration: tlsConfiguration, redirectConfiguration: .disallow)
        configuration.httpVersion = .http1Only
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// Whether `url` names this machine (plain HTTP to it stays on the machine).
    public static func isLoopback(_ url: URL) -> Bool {
        guard let host = url.host?.lowercased() else { return false }
        return isLoopback(host: host)
    }

    /// `localhost`, `::1`, or an IPv4 literal in 127.0.0.0/8 (not a DNS name that starts with "127.").
    public static func isLoopback(host: String) -> Bool {
        let host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if host == "localhost" || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts.allSatisfy({ !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isASCII) && UInt8($0) != nil }) else { return false }
        return parts[0] == "127"
    }

    /// - Parameter notFound: what a 404 answers instead of an error (a request an older server lacks).
    private func send(
        _ method: HTTPMethod, path: String, query: [String: String], body: Data?, contentType: String = WireFormat.rangeMediaType,
        notFound: Data? = nil
    ) async throws -> Data {
        try await exchange(method, path: path, query: query, body: body, contentType: contentType, notFound: notFound).body
    }

    /// ``send(_:path:query:body:contentType:notFound:)``, with the response's headers.
    private func exchange(
        _ method: HTTPMethod, path: String, query: [String: String], body: Data?, contentType: String,
        notFound: Data?
    ) async throws -> (body: Data, headers: HTTPHeaders) {
        if baseURL.scheme?.lowercased() == "http", !Self.isLoopback(baseURL), !allowsInsecureHTTP {
            throw ChronicleError.invalidArgument(
                "\(baseURL.absoluteString) is plain HTTP to another machine: the token and every value would cross the network in the clear; use https:// (or allow plain HTTP explicitly, `--insecure`)")
        }
        var components = URLComponents(url: baseURL.appendingPathComponent(path), resolvingAgainstBaseURL: false)
        if !query.isEmpty { components?.queryItems = query.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) } }
        guard let url = components?.url else { throw ChronicleError.invalidArgument("bad peer URL \(baseURL)") }
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        if let body {
            request.headers.add(name: "Content-Type", value: contentType)
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        if let trustedCertificates {
            var tls = Self.tlsConfiguration
            tls.trustRoots = .file(trustedCertificates.path)
            request.tlsConfiguration = tls
        }
        let seconds = max(1, timeout.components.seconds)
        let (response, buffer): (HTTPClientResponse, ByteBuffer)
        do {
            let answer = try await Self.client.execute(request, timeout: .seconds(seconds))
            (response, buffer) = (answer, try await answer.body.collect(upTo: maxResponseSize))
        } catch let error as ChronicleError {
            throw error
        } catch {
            throw ChronicleError.syncFailed(peer: baseURL.absoluteString, reason: Self.reason(for: error, seconds: seconds))
        }
        if response.status == .notFound, let notFound { return (notFound, response.headers) }
        guard response.status == .ok else {
            let message = String(buffer: buffer).trimmingCharacters(in: .whitespacesAndNewlines)
            if response.status == .unauthorized {
                throw ChronicleError.syncFailed(peer: baseURL.absoluteString, reason: "the server refused the token (401)")
            }
            throw ChronicleError.syncFailed(peer: baseURL.absoluteString, reason: "HTTP \(response.status.code): \(message)")
        }
        return (Data(buffer.readableBytesView), response.headers)
    }
}

extension HTTPTransport {
    /// A network or TLS failure as a person reads it: what happened and what to try, without
    /// the libraries' type names or BoringSSL's source paths.
    static func reason(for error: any Error, seconds: Int64) -> String {
        let text = String(describing: error)
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout, .deadlineExceeded, .readTimeout:
                return "no answer within \(seconds) s; check the URL and that the server is running"
            case .remoteConnectionClosed:
                return "the server closed the connection; check its log"
            case .bodyLengthMismatch:
                return "the answer was cut off or too large"
            default:
                break
            }
        }
        if let error = error as? NIOSSLError {
            if text.contains("WRONG_VERSION_NUMBER") {
                return "the TLS handshake failed: the server does not speak TLS on this port (a `chronicle serve` without --tls-cert serves http://)"
            }
            if text.contains("CERTIFICATE_VERIFY_FAILED") || text.contains("certificate") {
                return "the server's certificate is not trusted: for a self-signed server pass its authority (`--ca FILE`, `Peer.http(_:token:trustedCertificates:)`)"
            }
            if case .handshakeFailed = error { return "the TLS handshake failed (the server may need a newer TLS version or other ciphers)" }
            return "a TLS error (\(error))"
        }
        if error is NIOSSLExtraError { return "the server's certificate is not for this host name; connect with the name the certificate names" }
        if let error = error as? IOError { return networkReason(errno: error.errnoCode, text: text) }
        if text.contains("Connection refused") { return networkReason(errno: ECONNREFUSED, text: text) }
        if text.contains("NXDOMAIN") || text.contains("dnsAError") || text.contains("Name or service not known") {
            return "the host name does not resolve; check the URL"
        }
        return text
    }

    private static func networkReason(errno: CInt, text: String) -> String {
        switch errno {
        case ECONNREFUSED: "connection refused: nothing listens at that address and port; is the server running?"
        case EHOSTUNREACH, ENETUNREACH: "the host cannot be reached from here"
        case ETIMEDOUT: "no answer; check the address and any firewall"
        case ECONNRESET: "the connection was reset by the server"
        default: text
        }
    }
}

extension HTTPTransport: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The base URL; never the token.
    public var description: String { "HTTPTransport(\(baseURL.absoluteString), token: <redacted>)" }
    /// The same as ``description``: nothing secret.
    public var debugDescription: String { description }
    /// A mirror without the token (`dump` and the debugger).
    public var customMirror: Mirror {
        Mirror(self, children: ["baseURL": baseURL, "trustedCertificates": trustedCertificates as Any, "timeout": timeout], displayStyle: .struct)
    }
}
#endif
