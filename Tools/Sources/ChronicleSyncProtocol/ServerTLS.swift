public import Foundation
import ChronicleFormat
package import HummingbirdCore
import HummingbirdTLS
import NIOCore
import NIOSSL

/// A certificate and private key for HTTPS.
public struct ServerTLS: Sendable {
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

extension ServerTLS {
    /// HTTP/1.1, or HTTPS with `tls`, as both servers speak it: connections idle for
    /// `idleTimeout` are closed, `connections` decides who holds the rest (``ConnectionGuard``),
    /// TLS is 1.2 or 1.3 with forward-secret AEAD suites only.
    package static func serverBuilder(idleTimeout: Duration, connections: ConnectionGuard, tls: ServerTLS?) throws -> HTTPServerBuilder {
        // An idle connection is closed after `idleTimeout`, so a client that opens connections and
        // sends nothing cannot hold them forever.
        let idle = TimeAmount.nanoseconds(Int64(idleTimeout.components.seconds) * 1_000_000_000 + idleTimeout.components.attoseconds / 1_000_000_000)
        let http1 = HTTPServerBuilder.http1(configuration: .init(additionalChannelHandlers: connections.handlers(), idleTimeout: idle))
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
    package static let tls12CipherSuites = [
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    ].joined(separator: ":")
}
