@_spi(Wire) @testable import Chronicle
@_spi(Wire) @testable import ChronicleFormat
@testable import ChronicleHub
import ChronicleHTTP
import ChronicleTesting
import Foundation
import NIOHTTP1
import Testing
import ToolsTestSupport

/// What `POST /v1/events` answers when a token holder pushed other bodies under an identity.
extension HubTests {
    /// Writer ids are public and counters count up: a token holder pushes a forged body under a
    /// member's next identity, 1 MiB of payload, before the member writes it. The hub answers
    /// an identity's bodies in log order up to 1 MiB, so the forgery fills the answer and the
    /// genuine body is left out; the member, which forgets every identity an answer held
    /// "whatever the import did with it", never asks again (FORMAT.md 7.6).
    @Test func aForgedBodyPushedAheadDoesNotCrowdTheGenuineOneOutOfAnAnswer() async throws {
        try await withHub { hub in
            let tenant = try await hub.tenant()
            let (laptop, carrier) = (try await hub.token(tenant, "laptop"), try await hub.token(tenant, "carrier"))
            try await withTemporaryStores(1, configuration: groupConfiguration("family secret")) { stores in
                let store = stores[0]
                try store.set("first", for: .hubNote)
                try await Replicator(store: store, peers: [hub.peer(node: 0, token: laptop)]).sync()
                let last = try #require(try EventRange(decoding: Array(try store.exportRange(after: 0))).events.last { $0.key == Keys.hubNote.name })
                var forged = last
                forged.counter += 1
                forged.payload = randomBytes(1 << 20)
                let forgedRange = EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [], events: [forged], opaque: [])
                #expect(try await rawRequest(hub.urls[0].appendingPathComponent("v1/range"), method: .POST, token: carrier, body: Data(forgedRange.encoded())).status == 200)
                try store.set("genuine", for: .hubNote)
                let genuine = try #require(try EventRange(decoding: Array(try store.exportRange(after: 0))).events.last { $0.key == Keys.hubNote.name })
                #expect(genuine.counter == forged.counter, "the prediction missed")
                try await Replicator(store: store, peers: [hub.peer(node: 0, token: laptop)]).sync()
                let identity = EventIdentity(writer: genuine.origin, counter: genuine.counter)
                let answer = try await rawRequest(
                    hub.urls[0].appendingPathComponent("v1/events"), method: .POST, token: laptop, body: Data(EventIdentity.encodeRequest([identity])))
                let range = try EventRange(decoding: Array(answer.data))
                #expect(range.events.contains { $0.payload == genuine.payload }, "the answer held \(range.events.count) bodies, none the genuine one")
            }
        }
    }

    /// A token holder pushes a 1 MiB body under an identity of its own that a member also asks
    /// for (as the identity of an event it lost), before the member's genuine event: the hub
    /// answered each identity's smallest body in log order, so the large body filled the answer
    /// and the genuine one was left out of every answer. Smaller bodies go first now.
    @Test func aLargeBodyUnderAnotherIdentityDoesNotCrowdOutAGenuineOne() async throws {
        try await withHub { hub in
            let tenant = try await hub.tenant()
            let (laptop, carrier) = (try await hub.token(tenant, "laptop"), try await hub.token(tenant, "carrier"))
            try await withTemporaryStores(1, configuration: groupConfiguration("family secret")) { stores in
                let store = stores[0]
                try store.set("first", for: .hubNote)
                let model = try #require(try EventRange(decoding: Array(try store.exportRange(after: 0))).events.last { $0.key == Keys.hubNote.name })
                var large = model
                large.origin = ReplicaID.random()
                large.payload = randomBytes(1 << 20)
                let carried = EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [], events: [large], opaque: [])
                #expect(try await rawRequest(hub.urls[0].appendingPathComponent("v1/range"), method: .POST, token: carrier, body: Data(carried.encoded())).status == 200)
                try await Replicator(store: store, peers: [hub.peer(node: 0, token: laptop)]).sync()
                let genuine = EventIdentity(writer: model.origin, counter: model.counter)
                let transport = try #require(hub.peer(node: 0, token: laptop).transport as? HTTPTransport)
                let answer = try #require(try await transport.answerEvents([EventIdentity(writer: large.origin, counter: large.counter), genuine]))
                let range = try EventRange(decoding: Array(answer.range))
                #expect(range.events.contains { $0.payload == model.payload }, "the 1 MiB body under another identity crowded the genuine one out")
                #expect(answer.answeredWhole == [true, true])
            }
        }
    }

    /// The answer says which identities the hub had room for (`Chronicle-Answered-Whole`): two
    /// bodies of 1 MiB fill it, and an identity under which a token holder stored more bodies
    /// than an answer carries is not answered whole either. A member counts an answer against a
    /// lost event only when the hub had room for it.
    @Test func anAnswerSaysWhichIdentitiesItHadRoomFor() async throws {
        try await withHub { hub in
            let tenant = try await hub.tenant()
            let (laptop, carrier) = (try await hub.token(tenant, "laptop"), try await hub.token(tenant, "carrier"))
            try await withTemporaryStores(1, configuration: groupConfiguration("family secret")) { stores in
                let store = stores[0]
                try store.set("first", for: .hubNote)
                let model = try #require(try EventRange(decoding: Array(try store.exportRange(after: 0))).events.last { $0.key == Keys.hubNote.name })
                func body(_ size: Int, origin: ReplicaID) -> Event {
                    var event = model
                    event.origin = origin
                    event.payload = randomBytes(size)
                    return event
                }
                let (first, second, crowded) = (ReplicaID.random(), ReplicaID.random(), ReplicaID.random())
                let many = (0..<(HubDatabase.versionsPerIdentity + 2)).map { body(100 + $0, origin: crowded) }
                for events in [[body(1 << 20, origin: first)], [body((1 << 20) + 10, origin: second)]] + many.map({ [$0] }) {
                    let carried = EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [], events: events, opaque: [])
                    #expect(try await rawRequest(hub.urls[0].appendingPathComponent("v1/range"), method: .POST, token: carrier, body: Data(carried.encoded())).status == 200)
                }
                let transport = try #require(hub.peer(node: 0, token: laptop).transport as? HTTPTransport)
                let asked = [first, second, crowded].map { EventIdentity(writer: $0, counter: model.counter) }
                let answer = try #require(try await transport.answerEvents(asked))
                #expect(answer.answeredWhole == [true, false, false])
                let range = try EventRange(decoding: Array(answer.range))
                #expect(range.events.contains { $0.origin == first } && !range.events.contains { $0.origin == second })
                // Alone, the crowded identity fits, but only its smallest bodies travel.
                let alone = try #require(try await transport.answerEvents([asked[2]]))
                #expect(alone.answeredWhole == [false])
                let sizes = try EventRange(decoding: Array(alone.range)).events.map(\.payload.count)
                #expect(sizes == (0..<HubDatabase.versionsPerIdentity).map { 100 + $0 })
            }
        }
    }

    /// A token holder who reads a member's identity pushes more small forged bodies under it
    /// than an answer carries, each smaller than the genuine one: with the smallest bodies first,
    /// the genuine one never travelled, and the answer (saying it ran out of room) kept the
    /// member asking for ever. Each pushing device's smallest body comes first now.
    @Test func manySmallForgeriesFromOneDeviceDoNotHideTheGenuineBody() async throws {
        try await withHub { hub in
            let tenant = try await hub.tenant()
            let (laptop, carrier) = (try await hub.token(tenant, "laptop"), try await hub.token(tenant, "carrier"))
            try await withTemporaryStores(1, configuration: groupConfiguration("family secret")) { stores in
                let store = stores[0]
                try store.set(String(repeating: "genuine ", count: 40), for: .hubNote)
                try await Replicator(store: store, peers: [hub.peer(node: 0, token: laptop)]).sync()
                let genuine = try #require(try EventRange(decoding: Array(try store.exportRange(after: 0))).events.last { $0.key == Keys.hubNote.name })
                for size in 1...(HubDatabase.versionsPerIdentity + 4) {
                    var forged = genuine
                    forged.payload = randomBytes(size)
                    let carried = EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [], events: [forged], opaque: [])
                    #expect(try await rawRequest(hub.urls[0].appendingPathComponent("v1/range"), method: .POST, token: carrier, body: Data(carried.encoded())).status == 200)
                }
                let transport = try #require(hub.peer(node: 0, token: laptop).transport as? HTTPTransport)
                let answer = try #require(try await transport.answerEvents([EventIdentity(writer: genuine.origin, counter: genuine.counter)]))
                let range = try EventRange(decoding: Array(answer.range))
                #expect(range.events.contains { $0.payload == genuine.payload }, "\(range.events.count) forged bodies and not the genuine one")
            }
        }
    }

    /// One tenant's devices could take every connection of a node: token holders' connections
    /// counted per address only, and the node stops accepting at `maxConnections`, so a device
    /// of another tenant waited in the backlog. A tenant now holds at most half: a request on a
    /// connection past its share gets 503 and the connection closes.
    @Test func oneTenantsDevicesDoNotHoldEveryConnection() async throws {
        try await withHub(nodes: 1, configure: { node in
            node.maxConnections = 8
            node.maxConnectionsPerAddress = 2
        }) { hub in
            let (greedy, other) = (try await hub.tenant(), try await hub.tenant())
            let (greedyToken, otherToken) = (try await hub.token(greedy, "many"), try await hub.token(other, "one"))
            let port = try #require(hub.urls[0].port)
            var held: [RawSocket] = []
            defer { for socket in held { socket.close() } }
            for address in 1...4 {
                for _ in 0..<2 {
                    let socket = try RawSocket(port: port, from: "127.0.3.\(address)")
                    socket.send("GET /v1/info HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(greedyToken)\r\n\r\n")
                    held.append(socket)
                    // Its answer: the connection now holds a token (or was refused its share).
                    _ = await socket.readable()
                }
            }
            let refused = held.filter { answeredWith503OrClosed($0) }.count
            #expect(refused == held.count / 2, "\(refused) of the tenant's \(held.count) connections were refused")
            let newcomer = try RawSocket(port: port, from: "127.0.3.9")
            defer { newcomer.close() }
            newcomer.send("GET /v1/info HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(otherToken)\r\n\r\n")
            var answered = false
            if await newcomer.readable() {
                var bytes = [UInt8](repeating: 0, count: 16)
                let count = recv(newcomer.descriptor, &bytes, bytes.count, Int32(MSG_PEEK))
                answered = count > 0 && String(decoding: bytes.prefix(count), as: UTF8.self).hasPrefix("HTTP/1.1 200")
            }
            #expect(answered, "another tenant's device was not served while one tenant held every connection")
        }
    }
}

/// Whether the server answered `socket` with 503 or closed it.
private func answeredWith503OrClosed(_ socket: RawSocket) -> Bool {
    var bytes = [UInt8](repeating: 0, count: 16)
    let count = recv(socket.descriptor, &bytes, bytes.count, Int32(MSG_PEEK | MSG_DONTWAIT))
    if count == 0 { return true }
    return count > 0 && String(decoding: bytes.prefix(count), as: UTF8.self).hasPrefix("HTTP/1.1 503")
}
