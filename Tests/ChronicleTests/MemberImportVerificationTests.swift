@_spi(Wire) @testable import Chronicle
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleSodium
import ChronicleTesting
import Foundation
import Testing

/// The batched, pre-transaction verification of member imports (KeyID/AuthenticationTag
/// inline, KeyedHash, verifyAll before the write lock).
struct MemberImportVerificationTests {
    /// `count` members of one key-file group, each in its own directory (all deleted afterwards).
    func withKeyFileGroup(_ count: Int, _ body: (_ stores: [Store], _ configuration: Store.Configuration) async throws -> Void) async throws {
        let keyDirectory = temporaryDirectory()
        let directories = (0..<count).map { _ in temporaryDirectory() }
        defer {
            try? FileManager.default.removeItem(at: keyDirectory)
            for directory in directories { try? FileManager.default.removeItem(at: directory) }
        }
        let keyFile = keyDirectory.appendingPathComponent("group.key")
        try KeyEncryptionKeys.createKeyFile(keyFile)
        let configuration = Store.Configuration(keySource: .keyFile(keyFile))
        let stores = try directories.map { try Store(directory: $0, configuration: configuration) }
        try await body(stores, configuration)
    }

    static func key(_ index: Int) -> Key<String> { Key<String>("r13b.\(index)", default: "", sync: .manual) }

    /// Writes `count` values in one batch.
    func fill(_ store: Store, _ count: Int, prefix: String = "v") throws {
        try store.write { batch in
            for index in 0..<count { batch[Self.key(index)] = "\(prefix)\(index)" }
        }
    }

    /// Everything `store` has, decoded as a peer would (so the received bytes are kept).
    func wholeRange(_ store: Store) throws -> EventRange {
        let range = try store.eventLog.rangeExport.exportRange(after: 0, filter: .syncable, excluding: nil, maxEvents: 60_000, maxBytes: 64 << 20)
        return try EventRange(decoding: range.encoded())
    }

    /// A copy of `event` with another value and the authenticator it carried (so it does not verify).
    func altered(_ event: Event, _ text: String = "forged") -> Event {
        var forged = event
        forged.payload = Array("\"\(text)\"".utf8)
        return forged
    }

    // MARK: - (a) verdicts line up with the events they judge

    @Test func aBatchSplitOverCoresQuarantinesExactlyItsForgeries() async throws {
        try await withKeyFileGroup(2) { stores, _ in
            let (honest, victim) = (stores[0], stores[1])
            let count = 1_537  // three verification chunks where there are three cores, two here
            try fill(honest, count)
            var range = try wholeRange(honest)
            #expect(range.events.count == count)
            let chunk = (count + 1) / 2
            let forgedIndices: Set<Int> = [0, 1, chunk - 1, chunk, chunk + 1, 511, 512, 1_024, count - 2, count - 1]
            var events = range.events
            for index in forgedIndices { events[index] = altered(events[index]) }
            range.events = events
            let receipt = try victim.importRange(Data(range.encoded()), from: "review")
            #expect(receipt.applied == count - forgedIndices.count)
            #expect(receipt.quarantined == forgedIndices.count)
            let values = range.events.map { (String(decoding: $0.payload, as: UTF8.self), $0.key) }
            for (index, (_, name)) in values.enumerated() {
                let value = victim[Key<String>(name, default: "", sync: .manual)]
                if forgedIndices.contains(index) { #expect(value == "", "index \(index)") } else { #expect(value.hasPrefix("v"), "index \(index)") }
            }
            #expect(try victim.quarantinedItems().allSatisfy { $0.reason == .unauthenticated })
        }
    }

    @Test func aSecondVersionOfAnIdentityInTheSameBigBatchIsQuarantinedInEitherOrder() async throws {
        try await withKeyFileGroup(2) { stores, _ in
            let (honest, victim) = (stores[0], stores[1])
            try fill(honest, 1_200)
            var range = try wholeRange(honest)
            var events = range.events
            // Forgery before the genuine event (two places), and after it (two places), across both chunks.
            for index in [1_100, 700, 300, 10].sorted(by: >) {
                if index % 20 == 0 { events.insert(altered(events[index]), at: index) } else { events.insert(altered(events[index]), at: index + 1) }
            }
            range.events = events
            let receipt = try victim.importRange(Data(range.encoded()), from: "review")
            #expect(receipt.applied == 1_200)
            #expect(receipt.quarantined == 4)
            for index in [1_100, 700, 300, 10] { #expect(victim[Self.key(index)] == "v\(index)") }
            #expect(try victim.quarantinedItems().allSatisfy { $0.reason == .unauthenticated })
            #expect(try victim.verify().isSound)
        }
    }

    /// Events set aside for a missing key are released (with a verdict of "authentic") only when
    /// they verify; a forged copy set aside with them stays.
    @Test func onlyGenuineEventsLeaveTheQuarantineWhenTheirKeyArrives() async throws {
        try await withKeyFileGroup(2) { stores, _ in
            let (honest, victim) = (stores[0], stores[1])
            try fill(honest, 3)
            let full = try wholeRange(honest)
            let keyIDs = Set(full.events.compactMap { $0.authenticator?.keyID })
            let victimKey = try victim.eventLog.keyRecords.activeAndChainKeyIDs().active
            try #require(!keyIDs.isEmpty)
            try #require(victimKey == nil || !keyIDs.contains(victimKey!), "each member draws its own data key")
            // 1: the events without their key, plus forgeries under the same (unknown) key.
            var first = full
            first.keys = []
            var forgedNewIdentity = altered(full.events[0], "new identity")
            forgedNewIdentity.origin = ReplicaID.random()
            forgedNewIdentity.counter = 1
            first.events = full.events + [altered(full.events[1]), forgedNewIdentity]
            let held = try victim.importRange(Data(first.encoded()), from: "without key")
            #expect(held.applied == 0)
            #expect(held.quarantined == 5)
            // 2: the key alone, and a third forgery of an identity the quarantine holds genuinely.
            var second = full
            second.events = [altered(full.events[2], "in the key batch")]
            let released = try victim.importRange(Data(second.encoded()), from: "with key")
            #expect(released.keys >= 1)
            #expect(released.applied == 3)
            #expect(victim[Self.key(0)] == "v0")
            #expect(victim[Self.key(1)] == "v1")
            #expect(victim[Self.key(2)] == "v2")
            let left = try victim.quarantinedItems()
            #expect(left.count == 3)
            // Two forgeries arrived before the key (they waited for it), one after.
            #expect(left.map(\.reason).sorted { $0.rawValue < $1.rawValue } == [.unauthenticated, .awaitingKey, .awaitingKey])
            // 3: a later key batch releases nothing more.
            let again = try victim.importRange(Data(full.encoded()), from: "again")
            #expect(again.applied == 0)
            #expect(victim[Self.key(1)] == "v1")
            #expect(try victim.verify().isSound)
        }
    }

    // MARK: - (b) no traps on degenerate batches

    @Test func emptyAndSingleEventBatchesImportOnAMember() async throws {
        try await withKeyFileGroup(2) { stores, _ in
            let (honest, victim) = (stores[0], stores[1])
            try fill(honest, 1)
            let full = try wholeRange(honest)
            var empty = full
            empty.events = []
            empty.keys = []
            let none = try victim.importRange(Data(empty.encoded()), from: "empty")
            #expect(none.applied == 0 && none.quarantined == 0)
            var keysOnly = full
            keysOnly.events = []
            #expect(try victim.importRange(Data(keysOnly.encoded()), from: "keys only").applied == 0)
            #expect(try victim.importRange(Data(full.encoded()), from: "one").applied == 1)
            #expect(victim[Self.key(0)] == "v0")
        }
    }

    /// Every byte of a received event's authenticator region, truncated, flipped or extended, by a
    /// carrier that recomputes the range checksum: nothing traps and nothing applies.
    @Test func mangledAuthenticatorBytesNeverApplyNorTrap() async throws {
        try await withKeyFileGroup(2) { stores, _ in
            let (honest, victim) = (stores[0], stores[1])
            try fill(honest, 1)
            let full = try wholeRange(honest)
            let genuine = try #require(full.receivedBytes.first)
            let keys = full.keys.map { $0.encoded() }
            func send(_ item: [UInt8]) throws -> RangeReceipt? {
                let bytes = RelayRange.encode(
                    source: full.source.bytes, epoch: full.epoch.bytes, after: full.after, upTo: full.upTo, head: full.head,
                    afterChain: full.afterChain, upToChain: full.upToChain, keys: keys, events: [item])
                do { return try victim.importRange(Data(bytes), from: "mangled") } catch {
                    guard case .malformedInput = error else { throw error }
                    return nil
                }
            }
            let tail = 1 + KeyID.length + AuthenticationTag.length
            var variants: [[UInt8]] = []
            for cut in 1...tail + 1 { variants.append(Array(genuine.dropLast(cut))) }
            for position in (genuine.count - tail - 1)..<genuine.count {
                for mask: UInt8 in [0x01, 0x80, 0xFF] {
                    var flipped = genuine
                    flipped[position] ^= mask
                    variants.append(flipped)
                }
            }
            variants.append(genuine + [0])
            variants.append(genuine + Array(genuine.suffix(AuthenticationTag.length)))
            for variant in variants {
                if let receipt = try send(variant) { #expect(receipt.applied == 0) }
            }
            #expect(victim[Self.key(0)] == "")
            #expect(try send(genuine)?.applied == 1)
            #expect(victim[Self.key(0)] == "v0")
        }
    }

    @Test func concurrentImportsOfOneBigBatchApplyEachEventOnce() async throws {
        try await withKeyFileGroup(2) { stores, _ in
            let (honest, victim) = (stores[0], stores[1])
            try fill(honest, 1_100)
            var range = try wholeRange(honest)
            var events = range.events
            events[600] = altered(events[600])
            range.events = events
            let data = Data(range.encoded())
            let receipts = try await withThrowingTaskGroup(of: RangeReceipt.self) { group in
                for _ in 0..<3 { group.addTask { try victim.importRange(data, from: "racer") } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(receipts.map(\.applied).reduce(0, +) == 1_099)
            #expect(receipts.allSatisfy { $0.quarantined == 1 })
            #expect(victim[Self.key(600)] == "")
            #expect(try victim.logEntries().count(where: { _ in true }) >= 1_099)
            #expect(try victim.verify().isSound)
        }
    }

    // MARK: - (d) outputs are plain keyed BLAKE2b, as FORMAT.md says

    @Test func theKeyedChainHeadMACAndAuthenticatorsAreplainCryptoGenerichash() async throws {
        try await withKeyFileGroup(1) { stores, _ in
            let store = stores[0]
            try fill(store, 20)
            // Bodies on both sides of BLAKE2b's 128-byte blocks.
            for size in [0, 40, 80, 87, 88, 89, 200, 215, 216, 217, 1_000] {
                store[Key<String>("r13b.size.\(size)", default: "", sync: .manual)] = String(repeating: "x", count: size)
            }
            try store.set("sealed", for: SecretKey<String?>("r13b.secret", sync: .manual))
            let keyring = try store.crypto.get()
            let eventLog = try store.eventLog
            let (chainKeyID, records, meta) = try eventLog.environment.read { txn in
                var records: [(UInt64, [UInt8])] = []
                try txn.scan(eventLog.dbs.events) { key, value in
                    records.append((UInt64(bigEndianBytes: key) ?? 0, value))
                    return true
                }
                let meta = (
                    sequence: try txn.get(eventLog.dbs.meta, key: MetaKey.sequence), chain: try txn.get(eventLog.dbs.meta, key: MetaKey.chain),
                    epoch: try txn.get(eventLog.dbs.meta, key: MetaKey.epoch), mac: try txn.get(eventLog.dbs.meta, key: MetaKey.headMAC))
                return (try txn.get(eventLog.dbs.meta, key: MetaKey.chainKey), records, meta)
            }
            let chainIDBytes = try #require(chainKeyID)
            let chainID = try #require(KeyID(bytes: chainIDBytes))
            let chainSubkey = try KeyDerivation.derive(length: 32, id: 2, context: "chr.chan", from: try keyring.dataKey(chainID))
            var previous = [UInt8](repeating: 0, count: 32)
            var keyed = false
            var authenticated = 0
            for (sequence, value) in records {
                let kind = value[0]
                let body = Array(value[1..<(value.count - 32)])
                if kind == RecordKind.chainKey.rawValue { keyed = true }
                let input = previous + sequence.bigEndianBytes + [kind] + body
                let expected = keyed ? GenericHash.hash(input, key: chainSubkey, length: 32) : GenericHash.hash(input, length: 32)
                #expect(Array(value.suffix(32)) == expected, "record \(sequence)")
                previous = Array(value.suffix(32))
                if kind == RecordKind.event.rawValue, let event = try? Event(decoding: body), let authenticator = event.authenticator {
                    let subkey = try KeyDerivation.derive(length: 32, id: 3, context: "chr.auth", from: try keyring.dataKey(authenticator.keyID))
                    #expect(authenticator.tag.bytes == GenericHash.hash(event.authenticatedBytes(keyID: authenticator.keyID), key: subkey, length: 32))
                    authenticated += 1
                }
            }
            #expect(keyed)
            #expect(authenticated >= 32)
            #expect(meta.chain == previous)
            let macInput: [[UInt8]] = [
                Array("chronicle.head.v1".utf8), try #require(meta.sequence), previous, meta.epoch ?? LogEpoch.zero.bytes, chainID.bytes,
            ]
            #expect(meta.mac == GenericHash.hash(macInput, key: chainSubkey, length: 32))
        }
    }

    // MARK: - (e) key ids of the wrong length in meta

    /// A hex editor adds a `dk/` entry whose name is not 16 bytes: the store still opens and imports
    /// a batch that carries its keys; `statistics()` reports corruptMeta (`verify()` says sound).
    @Test func aMalformedWrappedKeyNameIsReportedNotSilentlySwallowed() async throws {
        try await withKeyFileGroup(2) { stores, configuration in
            let (honest, victim) = (stores[0], stores[1])
            try fill(honest, 2)
            let range = try wholeRange(honest)
            let eventLog = try victim.eventLog
            try eventLog.environment.write { txn in try txn.put(eventLog.dbs.meta, key: MetaKey.wrappedKeyPrefix + [1, 2, 3], value: [9, 9]) }
            let directory = victim.directory
            let reopened: Store
            do { reopened = try Store(directory: directory, configuration: configuration) } catch let error as ChronicleError {
                guard case .corruptMeta = error else { throw error }
                return  // reported at open: fine
            }
            var statsFailed = false
            do { _ = try reopened.statistics() } catch { statsFailed = true }
            let receipt: RangeReceipt
            do { receipt = try reopened.importRange(Data(range.encoded()), from: "honest") } catch let error as ChronicleError {
                guard case .corruptMeta = error else { throw error }
                return  // reported at import: fine
            }
            #expect(receipt.applied == 2, "stats failed: \(statsFailed); quarantined \(receipt.quarantined)")
            let report = try reopened.verify()
            #expect(!report.isSound || statsFailed, "a corrupt dk/ name passes verify and stats")
        }
    }

    /// The same hex edit, on a member that already holds a peer's key: events that key
    /// authenticates arrive without their key record (it travelled before). `prepareImport` reads
    /// the store's key ids with `try?`, gets none (the malformed name now throws corruptMeta), so it
    /// unwraps none, and the member quarantines genuine events as unauthenticated, saying nothing
    /// of the corruption. Before 945dd4f the malformed name became a bogus 3-byte id and the real
    /// ids were still read.
    @Test(arguments: [false, true])
    func aMalformedWrappedKeyNameDoesNotMakeAMemberQuarantineGenuineEvents(corrupt: Bool) async throws {
        try await withKeyFileGroup(2) { stores, configuration in
            let (honest, victim) = (stores[0], stores[1])
            try fill(honest, 2)
            let first = try wholeRange(honest)
            #expect(try victim.importRange(Data(first.encoded()), from: "honest").applied == 2)
            try fill(honest, 2, prefix: "w")
            var later = try EventRange(
                decoding: try honest.eventLog.rangeExport.exportRange(after: first.upTo, filter: .syncable, excluding: nil, maxEvents: 100, maxBytes: 1 << 20).encoded())
            later.keys = []  // sent before: a peer does not have to send them again
            #expect(later.events.count == 2)
            if corrupt {
                let eventLog = try victim.eventLog
                try eventLog.environment.write { txn in try txn.put(eventLog.dbs.meta, key: MetaKey.wrappedKeyPrefix + [1, 2, 3], value: [9, 9]) }
            }
            let reopened = try Store(directory: victim.directory, configuration: configuration)
            let receipt: RangeReceipt
            do { receipt = try reopened.importRange(Data(later.encoded()), from: "honest") } catch let error as ChronicleError {
                guard case .corruptMeta = error else { throw error }
                return  // the corruption reported: fine
            }
            let reasons = try reopened.quarantinedItems().map(\.reason)
            #expect(receipt.applied == 2, "quarantined \(receipt.quarantined): \(reasons)")
            #expect(reopened[Self.key(0)] == "w0")
        }
    }

    /// Newer-format (opaque) items interleaved with events do not shift the received bytes or the
    /// verdicts against the events they belong to.
    @Test func opaqueItemsBetweenEventsDoNotShiftVerdicts() async throws {
        try await withKeyFileGroup(2) { stores, _ in
            let (honest, victim) = (stores[0], stores[1])
            try fill(honest, 1_100)
            let full = try wholeRange(honest)
            var items: [[UInt8]] = []
            var forged: Set<Int> = []
            for (index, bytes) in full.receivedBytes.enumerated() {
                if index % 97 == 5 {
                    var newer = bytes
                    newer[0] = 99  // a newer format: opaque, stored and relayed (a member authenticated it)
                    newer[17 + 7] ^= 0x40  // its own identity
                    items.append(try retagged(newer, by: honest))
                }
                if index % 211 == 7 {
                    var altered = bytes
                    altered[altered.count - 60] ^= 1  // inside the payload
                    items.append(altered)
                    forged.insert(index)
                } else {
                    items.append(bytes)
                }
            }
            let bytes = RelayRange.encode(
                source: full.source.bytes, epoch: full.epoch.bytes, after: full.after, upTo: full.upTo, head: full.head,
                afterChain: full.afterChain, upToChain: full.upToChain, keys: full.keys.map { $0.encoded() }, events: items)
            let decoded = try EventRange(decoding: bytes)
            #expect(decoded.receivedBytes.count == decoded.events.count)
            #expect(!decoded.opaque.isEmpty)
            let receipt = try victim.importRange(Data(bytes), from: "review")
            #expect(receipt.applied == 1_100 - forged.count)
            #expect(receipt.quarantined == forged.count)
            #expect(receipt.opaque == decoded.opaque.count)
            for index in 0..<1_100 where !forged.contains(index) { #expect(victim[Self.key(index)] == "v\(index)") }
        }
    }

    /// A carrier's batch where every event names its own random key id (the key ids were once
    /// collected into an array with `contains`, quadratic in the batch; now a set): the whole batch
    /// is quarantined as unauthenticated, and the member imports the next genuine batch.
    @Test func aBatchNamingANewKeyPerEventIsQuarantinedWholeAndSyncGoesOn() async throws {
        try await withKeyFileGroup(2) { stores, _ in
            let (honest, victim) = (stores[0], stores[1])
            try fill(honest, 1)
            let template = try #require(try wholeRange(honest).events.first)
            let tag = try #require(template.authenticator?.tag)
            var range = try wholeRange(honest)
            range.keys = []
            let origin = ReplicaID.random()
            range.events = (1...UInt64(4_096)).map { counter in
                var event = template
                event.origin = origin
                event.counter = counter
                event.authenticator = Event.Authenticator(keyID: KeyID.random(), tag: tag)
                return event
            }
            let forged = try victim.importRange(Data(range.encoded()), from: "carrier")
            #expect(forged.applied == 0)
            #expect(forged.quarantined == 4_096)
            #expect(try victim.quarantinedItems().allSatisfy { $0.reason == .awaitingKey })
            let genuine = try victim.importRange(Data(try wholeRange(honest).encoded()), from: "honest")
            #expect(genuine.applied == 1)
        }
    }
}
