import AsyncHTTPClient
@testable import Chronicle
@testable import ChronicleFormat
@testable import ChronicleHTTPServer
import ChronicleHTTP
import ChronicleTesting
import Foundation
import NIOHTTP1
import NIOCore
import Synchronization
import Testing
import ToolsTestSupport

/// A carrier holding only the bearer token of a member's `chronicle serve`: whatever it
/// pushes is set aside, the member's values and secrets stay, and the group keeps syncing.
/// Serialized: two tests that run Argon2id at MODERATE cost side by side take both cores, and
/// each counts the derivations that happen while a request is answered.
@Suite(.serialized)
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
            let status = try await rawRequest(url.appendingPathComponent("v1/info"), token: "the token").status
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
            #expect(try served.quarantinedItems().allSatisfy { $0.reason == .unauthenticated && $0.source.hasPrefix("HTTP push from 127.0.0.1") })
            // A member with the same passphrase still syncs through the same server.
            let member = try Store(directory: directories.make(), configuration: configuration)
            try member.set("from a member", for: token)
            try await Replicator(store: member, peers: [.http(url, token: "the token")]).sync()
            #expect(try served.value(for: token) == "from a member")
            #expect(member[.httpNote] == "kept")
        }
    }

    /// `count` pushes of junk: each carries a batch's worth of passphrase key records at
    /// MODERATE cost (long enough per derivation to see what waits for them) and a forged copy
    /// of `model` naming each, so a member derives every record.
    static func junkKeyPushes(_ count: Int, like model: Event) -> [Data] {
        (0..<count).map { _ in
            let keys = (0..<Keyring.derivationsPerBatch).map { _ in
                WrappedKey(
                    id: KeyID.random(), kind: .passphrase, salt: randomBytes(16), limits: KeyDerivationCost.moderate.limits, created: 0,
                    nonce: randomBytes(24), sealedKey: randomBytes(48))
            }
            let events = keys.map { key in
                var event = model
                event.origin = ReplicaID.random()
                event.authenticator?.keyID = key.id
                return event
            }
            return Data(EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: keys, events: events, opaque: []).encoded())
        }
    }

    /// Pushes that make the served member derive keys (junk records that forged events name, at a
    /// real Argon2id cost) run on a thread of their own: more of them than NIO's blocking pool has
    /// threads do not hold up `GET /v1/info`, which answers while the first push still derives.
    @Test func pushesThatDeriveKeysDoNotStallOtherRequests() async throws {
        let directories = Directories()
        var configuration = Store.Configuration(keySource: .passphrase("the group"), keyDerivationCost: .minimumForTesting)
        configuration.travelKeyCost = .minimumForTesting
        let served = try Store(directory: directories.make(), configuration: configuration)
        served[.httpNote] = "kept"
        let model = try #require(try EventRange(decoding: Array(try served.exportRange(after: 0))).events.first)
        // MODERATE: long enough per derivation that the answer to info, slowed by a busy machine,
        // still comes well inside one push's four.
        let perPush = Keyring.derivationsPerBatch
        let pushes = NIOSingletons.blockingPoolThreadCountSuggestion + 1
        let bodies = Self.junkKeyPushes(pushes, like: model)
        let keyring = try served.crypto.get()
        let before = keyring.keks.derivations
        try await withServer(served, token: "the token") { url in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for body in bodies {
                    group.addTask { _ = try await rawRequest(url.appendingPathComponent("v1/range"), method: .POST, token: "the token", body: body) }
                }
                while keyring.keks.derivations == before { try await Task.sleep(for: .milliseconds(5)) }
                let info = try await rawRequest(url.appendingPathComponent("v1/info"), token: "the token")
                let derivedMeanwhile = keyring.keks.derivations - before
                #expect(info.status == 200)
                // With pushes on the shared pool, two run at once and info waits until one of them is
                // done: about 2 × 4 derivations. On their own queue, info answers during the first push's.
                #expect(derivedMeanwhile < perPush + 2, "GET /v1/info waited for \(derivedMeanwhile) derivations of other clients' pushes")
                try await group.waitForAll()
            }
        }
        #expect(keyring.keks.derivations - before == perPush * pushes)
        #expect(served[.httpNote] == "kept")
    }

    /// A member's push does not queue behind a stranger's Argon2id: two pushes of junk key
    /// records at MODERATE cost, then a push from a member whose key the server holds. The
    /// member's push is applied while the junk still derives (imports ran one at a time, each
    /// with its derivations: the member waited for all eight).
    @Test func aMembersPushDoesNotWaitForAStrangersDerivations() async throws {
        let directories = Directories()
        var configuration = Store.Configuration(keySource: .passphrase("the group"), keyDerivationCost: .minimumForTesting)
        configuration.travelKeyCost = .minimumForTesting
        let served = try Store(directory: directories.make(), configuration: configuration)
        let member = try Store(directory: directories.make(), configuration: configuration)
        member[.httpNote] = "first"
        _ = try served.importRange(try member.exportRange(after: 0))  // the server holds the member's key
        let model = try #require(try EventRange(decoding: Array(try member.exportRange(after: 0))).events.first)
        let perPush = Keyring.derivationsPerBatch
        let bodies = Self.junkKeyPushes(2, like: model)
        let keyring = try served.crypto.get()
        let before = keyring.keks.derivations
        try await withServer(served, token: "the token") { url in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for body in bodies {
                    group.addTask { _ = try await rawRequest(url.appendingPathComponent("v1/range"), method: .POST, token: "the token", body: body) }
                }
                while keyring.keks.derivations == before { try await Task.sleep(for: .milliseconds(5)) }
                member[.httpNote] = "second"
                let push = try await rawRequest(url.appendingPathComponent("v1/range"), method: .POST, token: "the token", body: try member.exportRange(after: 0))
                let derivedMeanwhile = keyring.keks.derivations - before
                #expect(push.status == 200)
                #expect(served[.httpNote] == "second")
                // Imports one at a time, each with its derivations, answered it after all eight.
                #expect(derivedMeanwhile < 2 * perPush, "the member's push waited for \(derivedMeanwhile) derivations of a stranger's pushes")
                try await group.waitForAll()
            }
        }
    }

    /// A carrier's push holds a derivation at a gate (an Argon2id run that takes long), with key
    /// records earlier pushes left waiting in the quarantine. A member's push whose key the server
    /// holds, and a push with no key record, apply at once over HTTP: before, every push kept a
    /// derivation for the waiting records and waited its turn behind the carrier's (46 s behind 8
    /// SENSITIVE pushes, 0.0 s alone).
    @Test func aPushThatNeedsNoDerivationDoesNotWaitForOneHeldAtAGate() async throws {
        let directories = Directories()
        var configuration = Store.Configuration(keySource: .passphrase("the group"), keyDerivationCost: .minimumForTesting)
        configuration.travelKeyCost = .minimumForTesting
        let served = try Store(directory: directories.make(), configuration: configuration)
        let member = try Store(directory: directories.make(), configuration: configuration)
        member[.httpNote] = "first"
        _ = try served.importRange(try member.exportRange(after: 0))  // the server holds the member's key
        let model = try #require(try EventRange(decoding: Array(try member.exportRange(after: 0))).events.first)
        func junk(_ records: Int) -> Data {
            let keys = (0..<records).map { _ in
                WrappedKey(
                    id: KeyID.random(), kind: .passphrase, salt: randomBytes(16), limits: KeyDerivationCost.minimumForTesting.limits, created: 0,
                    nonce: randomBytes(24), sealedKey: randomBytes(48))
            }
            let events = keys.map { key in
                var event = model
                event.origin = ReplicaID.random()
                event.authenticator?.keyID = key.id
                return event
            }
            return Data(EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: keys, events: events, opaque: []).encoded())
        }
        _ = try served.importRange(junk(16), from: "HTTP push")
        served.waitForKeyRecordRetries()
        #expect(try served.quarantinedItems().contains { $0.reason == .derivationBudget }, "no record waits")
        let turns = try served.crypto.get().received.turns
        let (entered, opened) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        turns.gate.withLock {
            $0 = { source in
                guard source.hasPrefix("HTTP push from") else { return }
                entered.signal()
                opened.wait()
            }
        }
        let carrierPush = junk(1)
        try await withServer(served, token: "the token") { url in
            let carrier = Task { try await rawRequest(url.appendingPathComponent("v1/range"), method: .POST, token: "the token", body: carrierPush) }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Thread {
                    entered.wait()
                    continuation.resume()
                }.start()
            }
            member[.httpNote] = "second"
            let memberPush = try member.exportRange(after: 0)
            var bare = try EventRange(decoding: Array(memberPush))
            bare.keys = []
            let bareBody = Data(bare.encoded())
            let pushes = Task {
                let first = try await rawRequest(url.appendingPathComponent("v1/range"), method: .POST, token: "the token", body: memberPush)
                let second = try await rawRequest(url.appendingPathComponent("v1/range"), method: .POST, token: "the token", body: bareBody)
                return (first.status, second.status)
            }
            // A generous hang guard: it fails only when the pushes never return while the gate holds.
            #expect(await finishes { _ = try await pushes.value }, "a push that needs no derivation waited for one held at a gate")
            opened.signal()
            let statuses = try await pushes.value
            #expect(statuses.0 == 200 && statuses.1 == 200)
            #expect(served[.httpNote] == "second")
            #expect(try await carrier.value.status == 200)
        }
        turns.gate.withLock { $0 = nil }
        served.waitForKeyRecordRetries()
    }

    /// At `chronicle serve`, which sees one token for every pusher, derivations take turns by
    /// client address: five pushes from one address that need a derivation each, queued behind
    /// one held at a gate, and then one push from another address. The other address's derivation
    /// runs next, not after the five (one queue for everyone put a new member's record behind
    /// every junk record queued before it).
    @Test func derivationsAtServeTakeTurnsByClientAddress() async throws {
        let directories = Directories()
        var configuration = Store.Configuration(keySource: .passphrase("the group"), keyDerivationCost: .minimumForTesting)
        configuration.travelKeyCost = .minimumForTesting
        let served = try Store(directory: directories.make(), configuration: configuration)
        served[.httpNote] = "kept"
        let model = try #require(try EventRange(decoding: Array(try served.exportRange(after: 0))).events.first)
        @Sendable func junk() -> [UInt8] {
            let key = WrappedKey(
                id: KeyID.random(), kind: .passphrase, salt: randomBytes(16), limits: KeyDerivationCost.minimumForTesting.limits, created: 0,
                nonce: randomBytes(24), sealedKey: randomBytes(48))
            var event = model
            event.origin = ReplicaID.random()
            event.authenticator?.keyID = key.id
            return EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: [key], events: [event], opaque: []).encoded()
        }
        let turns = try served.crypto.get().received.turns
        let (entered, opened, queued) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let held = Flag()
        turns.gate.withLock {
            $0 = { _ in
                guard !held.isSet else { return }
                held.set()
                entered.signal()
                opened.wait()
            }
        }
        turns.queued.withLock { $0 = { _ in queued.signal() } }
        @Sendable func wait(_ semaphore: DispatchSemaphore) async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Thread {
                    semaphore.wait()
                    continuation.resume()
                }.start()
            }
        }
        try await withServer(served, token: "the token") { url in
            let port = try #require(url.port)
            func push(from address: String) throws -> RawSocket {
                let socket = try RawSocket(port: port, from: address)
                let body = junk()
                socket.send("POST /v1/range HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer the token\r\nContent-Type: application/vnd.chronicle.range\r\nContent-Length: \(body.count)\r\n\r\n")
                socket.send(bytes: body)
                return socket
            }
            var sockets = [try push(from: "127.0.4.1")]
            defer { for socket in sockets { socket.close() } }
            await wait(entered)
            for _ in 0..<4 {
                sockets.append(try push(from: "127.0.4.1"))
                await wait(queued)
            }
            sockets.append(try push(from: "127.0.4.2"))
            await wait(queued)
            opened.signal()
            for socket in sockets {
                #expect(socket.answeredOrClosed(status: 200, within: 120), "a push was not answered")
            }
            let order = turns.servedSources.suffix(6)
            #expect(order.dropFirst().first == "HTTP push from 127.0.4.2", "the other address's derivation ran after \(Array(order))")
        }
        turns.gate.withLock { $0 = nil }
        turns.queued.withLock { $0 = nil }
        served.waitForKeyRecordRetries()
    }
}

