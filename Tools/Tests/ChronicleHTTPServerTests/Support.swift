import AsyncHTTPClient
import Logging
@testable import Chronicle
@testable import ChronicleFormat
@testable import ChronicleHTTPServer
import ChronicleHTTP
import ChronicleTesting
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import Testing
import ToolsTestSupport

/// Runs a server for `store` on a free loopback port for the duration of `body`.
func withServer<R: Sendable>(
    _ store: Store, token: String = "test-token", maxBodySize: Int? = nil, configure: (inout ChronicleServer) -> Void = { _ in },
    _ body: @Sendable (URL) async throws -> R
) async throws -> R {
    var server = ChronicleServer(store: store, token: token)
    if let maxBodySize { server.maxBodySize = maxBodySize }
    configure(&server)
    let (bound, task) = try await startServer(server)
    defer { task.cancel() }
    return try await body(URL(string: "http://127.0.0.1:\(bound)")!)
}

/// Starts `server` on a free loopback port and returns the port once it is bound (it waits on
/// the server's own report, not a poll), with the task to cancel when done.
func startServer(_ server: ChronicleServer, tls: ChronicleServer.TLS? = nil) async throws -> (port: Int, task: Task<Void, any Error>) {
    let port = Watched<Int?>(nil)
    let task = Task { try await server.run(host: "127.0.0.1", port: 0, tls: tls) { bound in port.update { $0 = bound } } }
    guard await port.wait(until: { $0 != nil }), let bound = port.value else {
        task.cancel()
        throw ChronicleError.storeUnavailable(reason: "the test server did not start")
    }
    return (bound, task)
}


extension Keys {
    static let httpNote = Key<String>("http.note", default: "", sync: .manual)
}
