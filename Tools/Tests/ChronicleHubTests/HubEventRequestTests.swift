@_spi(Wire) @testable import Chronicle
@_spi(Wire) @testable import ChronicleFormat
@testable import ChronicleHub
import ChronicleHTTP
import ChronicleTesting
import Foundation
import NIOHTTP1
import Testing
import ToolsTestSupport

/// A member asks the hub again for events it lost (`POST /v1/events`, FORMAT.md 7.6).
extension HubTests {
    /// The hub passes the checks every transport passes, asking by identity included (each
    /// remote a fresh tenant).
    @Test func aHubTenantConformsAsATransport() async throws {
        try await withHub { hub in
            try await TransportConformance.run {
                HTTPTransport(baseURL: hub.urls[0], token: try await hub.token(try await hub.tenant(), "device"))
            }
        }
    }

    /// Every body the tenant holds under an asked identity comes back (a relay cannot tell a
    /// carrier's from a member's), with the key records they name; a malformed or oversized
    /// request is a 400, a revoked token a 401, and no request reaches another tenant's events.
    @Test func eventRequestsAreBoundedAndScopedToTheTenant() async throws {
        try await withHub { hub in
            let (tenant, other) = (try await hub.tenant(), try await hub.tenant())
            let (laptop, carrier, stranger) = (try await hub.token(tenant, "laptop"), try await hub.token(tenant, "carrier"), try await hub.token(other, "stranger"))
            try await withTemporaryStores(1, configuration: groupConfiguration("family secret")) { stores in
                let store = stores[0]
                try store.set("genuine", for: .hubNote)
                try await Replicator(store: store, peers: [hub.peer(node: 0, token: laptop)]).sync()
                let genuine = try #require(try EventRange(decoding: Array(try store.exportRange(after: 0))).events.last { $0.key == Keys.hubNote.name })
                // The carrier pushes another body under the same identity.
                var forged = genuine
                forged.payload = randomBytes(32)
                let push = hub.urls[0].appendingPathComponent("v1/range")
                let forgedRange = EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [], events: [forged], opaque: [])
                #expect(try await rawRequest(push, method: .POST, token: carrier, body: Data(forgedRange.encoded())).status == 200)
                let identity = EventIdentity(writer: genuine.origin, counter: genuine.counter)
                let url = hub.urls[1].appendingPathComponent("v1/events")
                let answer = try await rawRequest(url, method: .POST, token: laptop, body: Data(EventIdentity.encodeRequest([identity])))
                #expect(answer.status == 200)
                let range = try EventRange(decoding: Array(answer.data))
                #expect(range.after == range.upTo && range.upTo == range.head)
                #expect(Set(range.events.map(\.payload)) == [genuine.payload, forged.payload])
                #expect(range.keys.contains { $0.id == genuine.authenticator?.keyID })
                // Another tenant's token finds nothing of this tenant's.
                let elsewhere = try await rawRequest(url, method: .POST, token: stranger, body: Data(EventIdentity.encodeRequest([identity])))
                #expect(try EventRange(decoding: Array(elsewhere.data)).events.isEmpty)
                // Malformed and oversized requests.
                let tooMany = (0...EventIdentity.maxPerRequest).map { EventIdentity(writer: .random(), counter: UInt64($0)) }
                #expect(try await rawRequest(url, method: .POST, token: laptop, body: Data(EventIdentity.encodeRequest(tooMany))).status == 413)
                #expect(try await rawRequest(url, method: .POST, token: laptop, body: Data([1, 0, 2] + randomBytes(24))).status == 400)
                #expect(try await rawRequest(url, method: .POST, token: laptop, body: Data([9, 0, 0])).status == 400)
                #expect(try await rawRequest(url, method: .POST, token: "chr_" + String(repeating: "A", count: 43), body: Data(EventIdentity.encodeRequest([identity]))).status == 401)
                // An identity named 1,024 times is answered as if named once: each body once,
                // and looked up once (the request used to join each repeat against every body).
                let repeated = try await rawRequest(
                    url, method: .POST, token: laptop,
                    body: Data(EventIdentity.encodeRequest(Array(repeating: identity, count: EventIdentity.maxPerRequest))))
                #expect(repeated.status == 200)
                #expect(try EventRange(decoding: Array(repeated.data)).events.count == 2, "a repeated identity was answered more than once")
                // The transport answers the same.
                let transport = HTTPTransport(baseURL: hub.urls[0], token: laptop)
                #expect(try EventRange(decoding: Array(try #require(try await transport.pullEvents([identity])))).events.count == 2)
            }
        }
    }
}
