import ChronicleFormat
public import Chronicle
import Foundation

/// A failed conformance check: what was expected and what happened.
public struct ConformanceFailure: Error, CustomStringConvertible {
    /// The check that failed.
    public let check: String
    /// What went wrong.
    public let detail: String

    public var description: String { "\(check): \(detail)" }
}

/// The checks every ``SyncTransport`` must pass.
///
/// ```swift
/// @Test func myTransportConforms() async throws {
///     try await TransportConformance.run { try MyTransport(to: freshRemote()) }
/// }
/// ```
///
/// `makeRemote` must return a transport to a fresh, empty remote replica each
/// time it is called. The suite makes its own local stores in temporary
/// directories and deletes them afterwards.
public enum TransportConformance {
    /// Runs every check; throws ``ConformanceFailure`` (or the transport's error) at the first failure.
    public static func run(makeRemote: () async throws -> any SyncTransport) async throws {
        try await identity(makeRemote())
        try await pushThenPull(makeRemote())
        try await resentRangesAreHarmless(makeRemote())
        try await malformedRangesApplyNothing(makeRemote())
        try await relayKeepsOriginAndPolicy(makeRemote())
        try await batchesResumeFromACheckpoint(makeRemote())
        try await eventsByIdentity(makeRemote())
    }

    // MARK: - Checks

    static func identity(_ transport: any SyncTransport) async throws {
        let first = try await transport.info()
        let second = try await transport.info()
        try require(first.replicaID == second.replicaID, "identity", "the replica id changed between calls")
        try require(first.protocolVersion == 2, "identity", "protocol version \(first.protocolVersion), expected 2")
        try require(first.epoch.bytes.count == LogEpoch.byteCount, "identity", "epoch of \(first.epoch.bytes.count) bytes")
        let empty = try await transport.pull(after: first.head, filter: .syncable, excludingOrigin: nil, maxEvents: 256)
        let store = try LocalStore()
        let receipt = try store.store.importRange(empty)
        try require(receipt.received == 0, "identity", "a pull at the head returned \(receipt.received) events")
    }

    static func pushThenPull(_ transport: any SyncTransport) async throws {
        let sender = try LocalStore()
        for i in 0..<10 { try sender.store.set(i, for: Key<Int>("conformance.n\(i)", default: -1, sync: .automaticSmall)) }
        try sender.store.set(1, for: Key<Int>("conformance.local", default: 0, sync: .never))
        let receipt = try await transport.push(try sender.store.exportRange(after: 0))
        try require(receipt.received == 10, "push", "the remote received \(receipt.received) events, expected 10 (never-synced events must not travel)")

        let receiver = try LocalStore()
        let pulled = try await pullAll(transport, into: receiver.store)
        try require(pulled >= 10, "pull", "pulled \(pulled) events, expected at least 10")
        for i in 0..<10 {
            let value = receiver.store[Key<Int>("conformance.n\(i)", default: -1, sync: .automaticSmall)]
            try require(value == i, "pull", "key conformance.n\(i) reads \(value), expected \(i)")
        }
        try require(receiver.store[Key<Int>("conformance.local", default: 0, sync: .automaticSmall)] == 0, "pull", "a .never event travelled")
        let history = try receiver.store.history(of: Key<Int>("conformance.n3", default: -1, sync: .automaticSmall))
        try require(history.first?.origin == (try sender.store.replicaID), "pull", "the origin was not preserved")

        // Events are excluded by their origin: the writer of the store that made them.
        guard let writer = try sender.store.replicaInfo().writer else {
            throw ConformanceFailure(check: "pull", detail: "the sender has no writer")
        }
        let mine = try await transport.pull(after: 0, filter: .syncable, excludingOrigin: writer, maxEvents: 256)
        let own = try LocalStore()
        try require(try own.store.importRange(mine).received == 0, "pull", "excludingOrigin returned the sender's own events")
    }

    static func resentRangesAreHarmless(_ transport: any SyncTransport) async throws {
        let sender = try LocalStore()
        try sender.store.set("x", for: Key<String>("conformance.resent", default: "", sync: .automaticSmall))
        let range = try sender.store.exportRange(after: 0)
        _ = try await transport.push(range)
        _ = try await transport.push(range)
        let receiver = try LocalStore()
        _ = try await pullAll(transport, into: receiver.store)
        let history = try receiver.store.history(of: Key<String>("conformance.resent", default: "", sync: .automaticSmall))
        try require(history.count == 1, "resend", "a re-sent event appears \(history.count) times")
    }

    static func malformedRangesApplyNothing(_ transport: any SyncTransport) async throws {
        let before = try await transport.info().head
        for (name, bytes) in [("garbage", Data("not a range".utf8)), ("empty", Data())] {
            do {
                _ = try await transport.push(bytes)
                throw ConformanceFailure(check: "malformed", detail: "a \(name) body was accepted")
            } catch is ConformanceFailure {
                throw ConformanceFailure(check: "malformed", detail: "a \(name) body was accepted")
            } catch {}
        }
        let sender = try LocalStore()
        try sender.store.set("y", for: Key<String>("conformance.truncated", default: "", sync: .automaticSmall))
        let valid = try sender.store.exportRange(after: 0)
        var rejected = false
        do { _ = try await transport.push(valid.prefix(valid.count - 5)) } catch { rejected = true }
        try require(rejected, "malformed", "a truncated range was accepted")
        let after = try await transport.info().head
        try require(after == before, "malformed", "the remote's log grew from \(before) to \(after) after rejected pushes")
    }

    static func relayKeepsOriginAndPolicy(_ transport: any SyncTransport) async throws {
        let origin = try LocalStore()
        let relay = try LocalStore()
        try origin.store.set("relayed", for: Key<String>("conformance.relay", default: "", sync: .manual))
        _ = try relay.store.importRange(try origin.store.exportRange(after: 0))
        _ = try await transport.push(try relay.store.exportRange(after: 0))
        let receiver = try LocalStore()
        _ = try await pullAll(transport, into: receiver.store)
        let entries = try receiver.store.logEntries().filter { $0.key == "conformance.relay" }
        try require(entries.count == 1, "relay", "the relayed event arrived \(entries.count) times")
        try require(entries.first?.origin == (try origin.store.replicaID), "relay", "the relay replaced the origin")
        try require(entries.first?.policy == .manual, "relay", "the relay changed the sync policy")
    }

    static func batchesResumeFromACheckpoint(_ transport: any SyncTransport) async throws {
        let sender = try LocalStore()
        try sender.store.write { batch in
            for i in 0..<600 { batch[Key<Int>("conformance.bulk\(i)", default: -1, sync: .automaticSmall)] = i }
        }
        var after: UInt64 = 0
        var pushes = 0
        while true {
            let data = try sender.store.exportRange(after: after, maxEvents: 256)
            let receipt = try await transport.push(data)
            pushes += 1
            if receipt.received == 0 || pushes > 10 { break }
            after += UInt64(receipt.received)
        }
        let receiver = try LocalStore()
        _ = try await pullAll(transport, into: receiver.store)
        let value = receiver.store[Key<Int>("conformance.bulk599", default: -1, sync: .automaticSmall)]
        try require(value == 599, "batches", "the last event of a multi-batch push reads \(value)")
    }

    /// A transport that can ask for events by identity answers exactly the events it holds
    /// with the identities asked, in a range that moves no checkpoint (`after` = `upTo`), and,
    /// when it says which identities it had room for, one answer per distinct identity.
    static func eventsByIdentity(_ transport: any SyncTransport) async throws {
        let sender = try LocalStore()
        for i in 0..<5 { try sender.store.set(i, for: Key<Int>("conformance.asked\(i)", default: -1, sync: .automaticSmall)) }
        _ = try await transport.push(try sender.store.exportRange(after: 0))
        guard let writer = try sender.store.replicaInfo().writer else {
            throw ConformanceFailure(check: "by identity", detail: "the sender has no writer")
        }
        let history = try sender.store.logEntries().filter { $0.key.hasPrefix("conformance.asked") }
        let asked = [history[1], history[3]].map { EventIdentity(writer: $0.writer, counter: $0.counter) }
        guard let whole = try await transport.answerEvents(asked + [asked[0], EventIdentity(writer: writer, counter: 1 << 40)]) else { return }
        if let said = whole.answeredWhole {
            // Three distinct identities (one named twice), all small: each answered whole.
            try require(said == [true, true, true], "by identity", "the answer says \(said) of three small identities it had room for")
        }
        let answer = whole.range
        guard let (upTo, _) = rangeBounds(answer), let after = rangeAfter(answer) else {
            throw ConformanceFailure(check: "by identity", detail: "the answer is not a range")
        }
        try require(after == upTo, "by identity", "the answer covers positions \(after)...\(upTo): it would move a checkpoint")
        let receiver = try LocalStore()
        let receipt = try receiver.store.importRange(answer)
        try require(receipt.received == 2 && receipt.applied == 2, "by identity", "asked for 2 held events and 1 unknown, received \(receipt.received)")
        try require(receiver.store[Key<Int>("conformance.asked1", default: -1, sync: .automaticSmall)] == 1, "by identity", "the wrong events came")
        try require(receiver.store[Key<Int>("conformance.asked3", default: -1, sync: .automaticSmall)] == 3, "by identity", "the wrong events came")
    }

    // MARK: - Helpers

    /// Pulls everything the remote has into `store`; returns the number of events received.
    @discardableResult
    public static func pullAll(_ transport: any SyncTransport, into store: Store) async throws -> Int {
        var after: UInt64 = 0
        var received = 0
        for _ in 0..<100_000 {
            let data = try await transport.pull(after: after, filter: .syncable, excludingOrigin: nil, maxEvents: 256)
            received += try store.importRange(data).received
            guard let (upTo, head) = rangeBounds(data), upTo > after, upTo < head else { break }
            after = upTo
        }
        return received
    }

    /// Reads `upTo` and `head` from an encoded range header.
    static func rangeBounds(_ data: Data) -> (UInt64, UInt64)? {
        let bytes = [UInt8](data)
        let offset = 8 + 1 + 16 + 16 + 8
        guard bytes.count >= offset + 16 else { return nil }
        func u64(_ at: Int) -> UInt64 { bytes[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        return (u64(offset), u64(offset + 8))
    }

    /// Reads `after` from an encoded range header.
    static func rangeAfter(_ data: Data) -> UInt64? {
        let bytes = [UInt8](data)
        let offset = 8 + 1 + 16 + 16
        guard bytes.count >= offset + 8 else { return nil }
        return bytes[offset..<offset + 8].reduce(0) { $0 << 8 | UInt64($1) }
    }

    static func require(_ condition: Bool, _ check: String, _ detail: @autoclosure () -> String) throws {
        if !condition { throw ConformanceFailure(check: check, detail: detail()) }
    }
}

/// A store in a temporary directory, deleted when the value goes away.
final class LocalStore {
    let directory: URL
    let store: Store

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-conformance-\(UUID().uuidString)")
        store = try Store(directory: directory)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}
