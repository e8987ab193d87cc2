import AsyncHTTPClient
@testable import Chronicle
@testable import ChronicleHTTP
import ChronicleTesting
import Foundation
import NIOHTTP1
import Testing

/// A carrier holding only the bearer token of a member's `chronicle serve`: whatever it
/// pushes is set aside, the member's values and secrets stay, and the group keeps syncing.
struct HostileCarrierTests {
    @Test func aCarrierWithTheTokenChangesNothingOverHTTP() async throws {
        let directories = Directories()
        let configuration = {
            var configuration = Store.Configuration(keySource: .passphrase("the group"), keyDerivationCost: .minimumForTesting)
            configuration.travelKeyCost = .minimumForTesting
            return configuration
        }()
        let served = try Store(directory: directories.make(), configuration: configuration)
        let token = SecretKey<String?>("carrier.token", sync: .manual)
        try served.set("s3cr3t", for: token)
        served[.httpNote] = "kept"
        try await withServer(served, token: "the token") { url in
            // The carrier pulls what a token allows, forges a remove of the secret and a new note, and pushes.
            let (status, _) = try await rawRequest(url.appendingPathComponent("v1/info"), token: "the token")
            #expect(status == 200)
            var range = try EventRange(decoding: Array(try served.exportRange(after: 0)))
            range.events = range.events.map { event in
                var forged = event
                forged.origin = ReplicaID.random()
                forged.hlc = HLC(rawValue: event.hlc.rawValue + (60_000 << 16))
                if forged.domain == .secrets { forged.op = .remove } else { forged.payload = Array("forged".utf8) }
                return forged
            }
            let push = try await rawRequest(url.appendingPathComponent("v1/range"), method: .POST, token: "the token", body: Data(range.encoded()))
            #expect(push.status == 200)
            let receipt = try JSONDecoder().decode(RangeReceipt.self, from: Data(push.body.utf8))
            #expect(receipt.quarantined == range.events.count && receipt.applied == 0)
            #expect(try served.value(for: token) == "s3cr3t")
            #expect(served[.httpNote] == "kept")
            #expect(try served.quarantinedItems().allSatisfy { $0.reason == .unauthenticated && $0.source == "HTTP push" })
            // A member with the same passphrase still syncs through the same server.
            let member = try Store(directory: directories.make(), configuration: configuration)
            try member.set("from a member", for: token)
            try await Replicator(store: member, peers: [.http(url, token: "the token")]).sync()
            #expect(try served.value(for: token) == "from a member")
            #expect(member[.httpNote] == "kept")
        }
    }
}
