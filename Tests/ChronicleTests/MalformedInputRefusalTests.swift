@_spi(Wire) @testable import Chronicle
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleSodium
import ChronicleTesting
import Foundation
import Testing

/// Each input FORMAT.md calls malformed, fed to a store the way a peer or a file delivers it:
/// the range that carries it is refused whole with `malformedInput`, and a well-formed event
/// travelling in the same range is not applied (docs/FORMAT.md 3.4, 6.2, 7.1, 7.4).
struct MalformedInputRefusalTests {
    static let good = Key<String>("refusal.good", default: "", sync: .manual)

    /// A well-formed event, encoded as a peer sends it.
    func goodEvent() -> [UInt8] {
        Event(
            origin: .random(), counter: 1, replica: .random(), hlc: HLC(rawValue: 1 << 20), domain: .defaults, op: .set, policy: .manual,
            encoding: ValueEncoding.string.rawValue, sealed: false, key: Self.good.name, payload: Array("good".utf8)
        ).encoded()
    }

    /// A range with checksum, carrying `keys` and the good event followed by `items`.
    func range(keys: [[UInt8]] = [], items: [[UInt8]], after: UInt64 = 0, upTo: UInt64 = 2, head: UInt64 = 2) -> Data {
        Data(RelayRange.encode(
            source: ReplicaID.random().bytes, epoch: LogEpoch.random().bytes, after: after, upTo: upTo, head: head,
            afterChain: RelayRange.emptyChain, upToChain: RelayRange.emptyChain, keys: keys, events: [goodEvent()] + items))
    }

    /// Expects `data` refused as malformed by a fresh store, which applies nothing of it.
    func expectRefused(_ data: Data, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try withTemporaryStore { store, _ in
            #expect(sourceLocation: sourceLocation) {
                try store.importRange(data, from: "a hostile peer")
            } throws: { error in
                guard case .malformedInput? = error as? ChronicleError else { return false }
                return true
            }
            #expect(store[Self.good] == "", "\(what): the good event of a refused range was applied", sourceLocation: sourceLocation)
            let entries = try store.logEntries()
            #expect(entries.isEmpty, "\(what): the log took something", sourceLocation: sourceLocation)
        }
    }

    /// The control: the same range without a bad item applies.
    @Test func theGoodEventAloneApplies() throws {
        try withTemporaryStore { store, _ in
            _ = try store.importRange(range(items: []), from: "a peer")
            #expect(store[Self.good] == "good")
        }
    }

    /// FORMAT.md 3.4, rules 1, 3, 5, 6 and 7: items that are malformed, each in a range of its own.
    @Test func malformedEventItemsRefuseTheirRange() throws {
        let good = goodEvent()
        let origin = ReplicaID.random().bytes
        // The offset of the key-name length byte in a version-2 event (3.1).
        let nameLength = 1 + 16 + 8 + 16 + 8 + 5
        var cases: [(String, [UInt8])] = [
            ("rule 1: 24 bytes", Array(good.prefix(24))),
            ("rule 1: version 0", [0] + origin + UInt64(1).bigEndianBytes + Array(good.dropFirst(25))),
            ("rule 1: counter 0", [2] + origin + UInt64(0).bigEndianBytes + Array(good.dropFirst(25))),
            ("rule 3: 40 bytes", Array(good.prefix(40))),
            ("rule 3: cut before the payload length", Array(good.prefix(nameLength + 1 + Self.good.name.utf8.count + 2))),
            ("rule 7: a byte left over", good + [0]),
            ("rule 6: no authenticator kind", Array(good.dropLast())),
        ]
        var emptyName = good
        emptyName[nameLength] = 0
        cases.append(("rule 5: a name of length 0", emptyName))
        var longName = good
        longName[nameLength] = 255
        cases.append(("rule 5: a name past the end", longName))
        var notUTF8 = good
        notUTF8[nameLength + 1] = 0xFF
        cases.append(("rule 5: a name that is not UTF-8", notUTF8))
        var longPayload = good
        let payloadLength = nameLength + 1 + Self.good.name.utf8.count
        longPayload.replaceSubrange(payloadLength..<payloadLength + 4, with: UInt32(1 << 20).bigEndianBytes)
        cases.append(("rule 5: a payload past the end", longPayload))
        var truncatedTag = Array(good.dropLast())
        truncatedTag.append(1)
        truncatedTag += [UInt8](repeating: 7, count: 16 + 31)
        cases.append(("rule 6: authenticator kind 1 truncated", truncatedTag))
        for (name, item) in cases {
            try expectRefused(range(items: [item]), name)
        }
    }

    /// FORMAT.md 6.2: a wrapped-key record shorter than 18 bytes, or of version 0, is malformed,
    /// and so is its range.
    @Test func malformedKeyRecordsRefuseTheirRange() throws {
        let id = KeyID.random().bytes
        try expectRefused(range(keys: [[1] + id], items: []), "a 17-byte key record")
        try expectRefused(range(keys: [[0] + id + [2] + [UInt8](repeating: 0, count: 40)], items: []), "a key record of version 0")
    }

    /// FORMAT.md 7.1: the bounds of a range: `after ≤ upTo ≤ head`, at most 65,536 items, an item
    /// of at most 256 MiB, and nothing after the last item.
    @Test func rangesOutOfTheirBoundsAreRefused() throws {
        try expectRefused(range(items: [], after: 5, upTo: 4, head: 9), "after above upTo")
        try expectRefused(range(items: [], after: 0, upTo: 9, head: 4), "upTo above head")
        // The header's item count and an item's length, patched with the checksum made again.
        let header = 8 + 1 + 16 + 16 + 24 + 64
        func patched(_ data: Data, at offset: Int, _ bytes: [UInt8]) -> Data {
            var body = Array(data.dropLast(32))
            body.replaceSubrange(offset..<offset + bytes.count, with: bytes)
            return Data(body + GenericHash.hash(body))
        }
        let one = range(items: [])
        try expectRefused(patched(one, at: header, UInt32(EventRange.maxItems + 1).bigEndianBytes), "65,537 items")
        try expectRefused(patched(one, at: header + 4 + 1, UInt32(EventRange.maxEncodedSize + 1).bigEndianBytes), "an item over 256 MiB")
        let withTrailer = Array(one.dropLast(32)) + [0]
        try expectRefused(Data(withTrailer + GenericHash.hash(withTrailer)), "a byte after the last item")
    }

    /// FORMAT.md 7.4: a frame of a range stream that is not a range stops the import with an
    /// error; the frames before it stay applied.
    @Test func aStreamFrameThatIsNotARangeStopsTheImport() throws {
        try withTemporaryStore { store, _ in
            let first = Array(range(items: []))
            let garbage = Array("not a range at all".utf8)
            let stream = Array("CHRNSTRM".utf8) + [1] + UInt64(first.count).bigEndianBytes + first + UInt64(garbage.count).bigEndianBytes + garbage
            let file = temporaryDirectory()
            try FileManager.default.createDirectory(at: file, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: file) }
            let path = file.appendingPathComponent("stream.range")
            try Data(stream).write(to: path)
            #expect {
                try store.importFile(at: path)
            } throws: { error in
                // The message says the frames before the bad one stayed applied.
                guard case let .malformedInput(text)? = error as? ChronicleError else { return false }
                return text.contains("the ranges before it were applied and kept (events applied: 1)")
            }
            #expect(store[Self.good] == "good", "the frame before the bad one was not kept")
        }
    }

    /// FORMAT.md 2: a store whose `format` is newer than this build's is refused with
    /// `incompatibleFormat`, as builds before gaps refuse a store of format 2.
    @Test func aNewerStoreFormatIsRefused() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let store = try Store(directory: directory)
            try store.set("x", for: Self.good)
            let eventLog = try store.eventLog
            try eventLog.environment.write { txn in
                try txn.put(eventLog.dbs.meta, key: MetaKey.format, value: (EventLog.formatVersion + 1).bigEndianBytes)
            }
        }
        #expect(throws: ChronicleError.incompatibleFormat(found: EventLog.formatVersion + 1, supported: EventLog.formatVersion)) {
            _ = try Store(directory: directory)
        }
    }
}
