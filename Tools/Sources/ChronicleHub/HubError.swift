import Hummingbird

/// What the hub refuses, with the HTTP status it answers.
enum HubRefusal: Error, CustomStringConvertible {
    /// A push over a quota (507: the tenant's storage is full): the message, and which quota
    /// (`events`, `bytes`, `device_keys`, `tenant_keys`: the label of its metric).
    case quotaExceeded(String, quota: String)
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
        case let .quotaExceeded(text, _), let .invalidName(text), let .busy(text): text
        case let .unknownTenant(name): "no tenant named \(name)"
        case .revokedToken: HubBackend.refusal
        }
    }

    var httpError: HTTPError {
        switch self {
        case let .quotaExceeded(text, _): HTTPError(.init(code: 507, reasonPhrase: "Insufficient Storage"), message: text)
        case let .invalidName(text): HTTPError(.badRequest, message: text)
        case let .unknownTenant(name): HTTPError(.notFound, message: "no tenant named \(name)")
        case .revokedToken: HTTPError(.unauthorized, headers: [.wwwAuthenticate: "Bearer"], message: HubBackend.refusal)
        case let .busy(text): HTTPError(.serviceUnavailable, headers: [.retryAfter: "1"], message: text)
        }
    }
}
