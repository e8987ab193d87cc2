import Hummingbird

/// What the hub refuses, with the HTTP status it answers.
enum HubRefusal: Error, CustomStringConvertible {
    /// A tenant over its event or byte quota (507: the tenant's storage is full).
    case quotaExceeded(String)
    /// No such tenant (the operator's commands).
    case unknownTenant(String)
    /// A name the operator gave is not acceptable.
    case invalidName(String)
    /// A token revoked (or its tenant removed) since this node last served it (401).
    case revokedToken
    /// The tenant has as many requests of a kind running on this node as it may (503, retry).
    case busy(String)

    var description: String {
        switch self {
        case let .quotaExceeded(text), let .invalidName(text), let .busy(text): text
        case let .unknownTenant(name): "no tenant named \(name)"
        case .revokedToken: HubBackend.refusal
        }
    }

    var httpError: HTTPError {
        switch self {
        case let .quotaExceeded(text): HTTPError(.init(code: 507, reasonPhrase: "Insufficient Storage"), message: text)
        case let .invalidName(text): HTTPError(.badRequest, message: text)
        case let .unknownTenant(name): HTTPError(.notFound, message: "no tenant named \(name)")
        case .revokedToken: HTTPError(.unauthorized, headers: [.wwwAuthenticate: "Bearer"], message: HubBackend.refusal)
        case let .busy(text): HTTPError(.serviceUnavailable, headers: [.retryAfter: "1"], message: text)
        }
    }
}
