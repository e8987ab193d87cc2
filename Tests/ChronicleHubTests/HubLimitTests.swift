import AsyncHTTPClient
@testable import Chronicle
@testable import ChronicleHub
import Foundation
import NIOCore
import NIOHTTP1
import Subprocess
import SystemPackage
import Testing

/// What a request the protocol does not allow gets from a hub node: its own status, never
/// "database unavailable".
extension HubTests {
    @Test func anOversizedChunkedPushGets413AndAMalformedQuery400() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "device")
            var request = HTTPClientRequest(url: hub.urls[0].appendingPathComponent("v1/range").absoluteString)
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            let chunks = AsyncStream<ByteBuffer> { continuation in
                for _ in 0..<17 { continuation.yield(ByteBuffer(bytes: [UInt8](repeating: 7, count: 1 << 20))) }
                continuation.finish()
            }
            request.body = .stream(chunks, length: .unknown)
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
            #expect(response.status.code == 413)
            for (name, value) in [("max", "abc"), ("wait", "soon")] {
                let url = hub.urls[0].appendingPathComponent("v1/range").appending(queryItems: [.init(name: "after", value: "0"), .init(name: name, value: value)])
                #expect(try await rawRequest(url, token: token).status == 400, "\(name)=\(value)")
            }
        }
    }

    /// `chronicle hub tenant add` gives a new tenant quotas unless told `--unlimited`: one
    /// tenant's devices cannot fill the database by default.
    @Test func newTenantsGetQuotasByDefault() async throws {
        let url = try #require(testDatabase)
        try await withHub(nodes: 1) { hub in
            let (limited, unlimited) = ("t-\(UUID().uuidString.prefix(12).lowercased())", "t-\(UUID().uuidString.prefix(12).lowercased())")
            for arguments in [["hub", "tenant", "add", limited], ["hub", "tenant", "add", unlimited, "--unlimited"]] {
                let result = try await Subprocess.run(
                    .path(FilePath(try chronicleExecutable().path)), arguments: Arguments(arguments),
                    environment: .inherit.updating(["CHRONICLE_HUB_DATABASE": url]), output: .discarded, error: .string(limit: 1 << 16))
                #expect(result.terminationStatus == .exited(0), "\(result.standardError)")
            }
            let tenants = try await hub.admin.tenants()
            let first = try #require(tenants.first { $0.name == limited })
            #expect(first.maxEvents == 1_000_000 && first.maxBytes == 1 << 30)
            let second = try #require(tenants.first { $0.name == unlimited })
            #expect(second.maxEvents == nil && second.maxBytes == nil)
        }
    }
}

