import AsyncHTTPClient
public import Chronicle
public import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL

extension Peer {
    /// A `chronicle serve` reached over HTTP(S), authenticated with a bearer token.
    public static func http(_ url: URL, token: String, trustedCertificates: URL? = nil) -> Peer {
        Peer(name: url.absoluteString, transport: HTTPTransport(baseURL: url, token: token, trustedCertificates: trustedCertificates))
    }
}
