import AsyncHTTPClient
import Logging
import Subprocess
import SystemPackage
@testable import Chronicle
@testable import ChronicleFormat
@testable import ChronicleHTTPServer
@testable import ChronicleSyncProtocol
import ChronicleHTTP
import ChronicleTesting
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import Testing
import ToolsTestSupport

struct TLSTests {
    /// HTTPS with a self-signed certificate made by `openssl` (skipped where openssl is missing).
    @Test func syncOverHTTPSWithATrustedSelfSignedCertificate() async throws {
        let directories = Directories()
        let pki = directories.make()
        try FileManager.default.createDirectory(at: pki, withIntermediateDirectories: true)
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else { return }
        let openssl = try await Subprocess.run(
            .path("/usr/bin/openssl"),
            arguments: [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName=IP:127.0.0.1",
                "-keyout", pki.appendingPathComponent("key.pem").path, "-out", pki.appendingPathComponent("cert.pem").path,
            ],
            output: .discarded, error: .discarded)
        try #require(openssl.terminationStatus == .exited(0))

        let server = try Store(directory: directories.make())
        let client = try Store(directory: directories.make())
        server[.httpNote] = "over TLS"
        let tls = ChronicleServer.TLS(certificateChain: pki.appendingPathComponent("cert.pem"), privateKey: pki.appendingPathComponent("key.pem"))
        let (port, task) = try await startServer(ChronicleServer(store: server, token: "tls-token"), tls: tls)
        defer { task.cancel() }
        let url = URL(string: "https://127.0.0.1:\(port)")!
        // Without trusting the certificate the connection fails; trusting it, the sync works.
        var untrusting = HTTPTransport(baseURL: url, token: "tls-token")
        untrusting.timeout = .seconds(3)  // the client keeps retrying a failed handshake until its deadline
        let untrusted = Peer(name: "untrusted", transport: untrusting)
        await #expect(throws: (any Error).self) { try await Replicator(store: client, peers: [untrusted]).sync() }
        try await Replicator(store: client, peers: [.http(url, token: "tls-token", trustedCertificates: pki.appendingPathComponent("cert.pem"))]).sync()
        #expect(client[.httpNote] == "over TLS")

        // TLS 1.0 and 1.1 are refused, 1.2 accepted (the client side is told to allow old versions,
        // so a refusal is the server's).
        let boundPort = port
        func handshake(_ version: String, ciphers: String = "DEFAULT:@SECLEVEL=0") async throws -> Bool {
            let result = try await Subprocess.run(
                .path("/usr/bin/openssl"),
                arguments: ["s_client", "-connect", "127.0.0.1:\(boundPort)", version, "-cipher", ciphers, "-brief"],
                input: .none, output: .discarded, error: .discarded)
            return result.terminationStatus == .exited(0)
        }
        #expect(try await handshake("-tls1_2"))
        #expect(try await !handshake("-tls1"))
        #expect(try await !handshake("-tls1_1"))
        // TLS 1.2 only with forward secrecy and an AEAD: RSA key exchange and CBC-SHA1 suites are refused.
        #expect(try await handshake("-tls1_2", ciphers: "ECDHE-RSA-AES128-GCM-SHA256"))
        #expect(try await !handshake("-tls1_2", ciphers: "AES128-GCM-SHA256:@SECLEVEL=0"))
        #expect(try await !handshake("-tls1_2", ciphers: "ECDHE-RSA-AES128-SHA:@SECLEVEL=0"))
    }
}
