import Chronicle
import ChronicleHTTP
@testable import ChronicleHTTPServer
@testable import ChronicleSyncProtocol
import ChronicleTesting
import Foundation
import InMemoryLogging
import Logging
import Testing
import ToolsTestSupport

/// What an operator reads: one access line per request (never a token), and failures that say
/// what happened in words, once, without the libraries' type names.
struct OperatorMessageTests {
    @Test func everyRequestGetsOneAccessLineWithoutTheToken() async throws {
        try await withTemporaryStore { store, _ async throws in
            let handler = InMemoryLogHandler()
            let token = "access-log-token-\(UUID().uuidString)"
            try await withServer(store, token: token, configure: { $0.logger = Logger(label: "test", factory: { _ in handler }) }) { url in
                _ = try await rawRequest(url.appendingPathComponent("v1/info"), token: token)
                _ = try await rawRequest(url.appendingPathComponent("v1/info"), token: "not-the-token-\(token.suffix(6))")
                _ = try await rawRequest(url.appendingPathComponent("v1/range").appending(queryItems: [.init(name: "after", value: "x")]), token: token)
            }
            let access = handler.entries.filter { $0.metadata["log"] == "access" }.map(\.message.description)
            #expect(access == ["GET /v1/info 200", "GET /v1/info 401", "GET /v1/range 400"], "\(access)")
            let everything = handler.entries.map { "\($0.message) \($0.metadata)" }.joined(separator: "\n")
            #expect(!everything.contains(token) && !everything.contains("not-the-token"))
        }
    }

    /// https:// to a server that serves plain HTTP: said in words, once.
    @Test func aTLSMismatchIsSaidInWords() async throws {
        try await withTemporaryStores(2) { stores in
            try await withServer(stores[0]) { url in
                var components = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false))
                components.scheme = "https"
                let peer = Peer.http(try #require(components.url), token: "test-token")
                try stores[1].set(1, for: Key<Int>("k", default: 0, sync: .manual))
                await #expect {
                    try await Replicator(store: stores[1], peers: [peer]).sync()
                } throws: { error in
                    let text = "\(error)"
                    return text.contains("does not speak TLS") && !text.contains("BoringSSL") && !text.contains("NIOSSL")
                        && text.components(separatedBy: "sync with").count == 2
                }
            }
        }
    }

    /// Nothing listening: "connection refused", not NIO's IOError.
    @Test func aClosedPortIsSaidInWords() async throws {
        try await withTemporaryStore { store, _ async throws in
            try store.set(1, for: Key<Int>("k", default: 0, sync: .manual))
            await #expect {
                try await Replicator(store: store, peers: [.http(URL(string: "http://127.0.0.1:1")!, token: "t")]).sync()
            } throws: { error in
                let text = "\(error)"
                return text.contains("connection refused") && !text.contains("IOError") && text.components(separatedBy: "sync with").count == 2
            }
        }
    }

    /// A certificate that cannot be loaded: the error names the file and the cause.
    @Test func anUnloadableCertificateNamesItsFile() throws {
        let missing = URL(fileURLWithPath: "/nonexistent-\(UUID().uuidString).pem")
        #expect {
            _ = try ServerTLS.serverBuilder(
                idleTimeout: .seconds(5), connections: ConnectionGuard(maxPerClient: 0, maxUnauthenticated: 16), tls: ServerTLS(certificateChain: missing, privateKey: missing))
        } throws: { error in
            "\(error)".contains(missing.path) && "\(error)".contains("no such file")
        }
    }
}
