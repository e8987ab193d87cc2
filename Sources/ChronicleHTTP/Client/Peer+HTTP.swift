import ChronicleFormat
#if HTTPClient
import AsyncHTTPClient
public import Chronicle
public import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL

extension Peer {
    /// A `chronicle serve` reached over HTTPS (or HTTP on this machine), authenticated with a bearer token.
    ///
    /// - Parameters:
    ///   - trustedCertificates: A PEM file of certificate authorities to trust (a self-signed server).
    ///   - allowingInsecureHTTP: Allow `http://` to another machine, sending the token and the
    ///     values in the clear. Without it, such a sync fails with a clear error.
    public static func http(_ url: URL, token: String, trustedCertificates: URL? = nil, allowingInsecureHTTP: Bool = false) -> Peer {
        var transport = HTTPTransport(baseURL: url, token: token, trustedCertificates: trustedCertificates)
        transport.allowsInsecureHTTP = allowingInsecureHTTP
        return Peer(name: url.absoluteString, transport: transport)
    }
}
#endif
#if !HTTPClient
public import Chronicle
public import Foundation

extension Peer {
    /// Without the package's `HTTPClient` trait there is no HTTP client: this declaration only says so.
    @available(*, unavailable, message: "enable the Chronicle package's HTTPClient trait: .package(url: …, from: …, traits: [\"HTTPClient\"])")
    public static func http(_ url: URL, token: String, trustedCertificates: URL? = nil, allowingInsecureHTTP: Bool = false) -> Peer {
        // Safe: an unavailable declaration cannot be called, so this line never runs.
        fatalError("Peer.http needs the HTTPClient trait")
    }
}
#endif
