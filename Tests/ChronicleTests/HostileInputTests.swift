@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import ChronicleLMDB
import Synchronization
import Testing

struct HostileInputTests {
    /// Key ids from 16 bytes, contiguous or not, are the same id (contiguous bytes load as two
    /// words, the rest byte by byte); any other length is no id, and a meta entry of another
    /// length is corrupt meta.
    @Test func keyIDsParseTheSameFromAnyBytes() throws {
        let bytes = (0..<16).map { UInt8($0 * 17 & 0xFF) }
        let id = try #require(KeyID(bytes: bytes))
        #expect(id.bytes == bytes)
        #expect(KeyID(bytes: bytes[...]) == id)
        #expect(KeyID(bytes: bytes.lazy.map { $0 }) == id, "a collection without contiguous storage")
        #expect(KeyID(bytes: Array(repeating: 1, count: 8) + bytes)?.bytes == nil)
        #expect(KeyID(bytes: bytes.dropLast()) == nil)
        #expect(throws: ChronicleError.self) { try KeyID(metaEntry: "active key", [1, 2, 3]) }
        #expect(try KeyID(metaEntry: "active key", bytes) == id)
    }

    /// Key names in events: any UTF-8 decodes to the same name (ASCII takes a fast path, the rest
    /// is validated), bytes that are not UTF-8 are refused, and replay keeps non-ASCII names.
    @Test func eventKeyNamesAreUTF8OrRefused() throws {
        func event(key: String) -> Event {
            Event(
                origin: .random(), counter: 1, replica: .random(), hlc: HLC(rawValue: 1 << 20), domain: .defaults, op: .set,
                policy: .manual, encoding: 0, sealed: false, key: key, payload: [1, 2, 3])
        }
        for name in ["theme", "héllo.世界", "🌍", String(repeating: "é", count: 127)] {
            #expect(try Event(decoding: event(key: name).encoded()).key == name)
        }
        // The name "ab" as its length byte and bytes, with the second byte replaced by a lone
        // continuation byte, an overlong "/" and a truncated sequence.
        let encoded = event(key: "ab").encoded()
        guard let nameAt = encoded.indices.dropLast(2).first(where: { encoded[$0] == 2 && encoded[$0 + 1] == 0x61 && encoded[$0 + 2] == 0x62 }) else {
            Issue.record("no key name in the encoding")
            return
        }
        for bad: [UInt8] in [[0x61, 0x80], [0xC0, 0xAF], [0x61, 0xE2]] {
            var bytes = encoded
            bytes[nameAt + 1] = bad[0]
            bytes[nameAt + 2] = bad[1]
            #expect(throws: (any Error).self) { try Event(decoding: bytes) }
        }
        try withTemporaryStore { store, _ in
            let key = Key<Int>("réglages.thème", default: 0)
            store[key] = 4
            try store.rebuildViews()
            #expect(store[key] == 4)
            #expect(try store.verify().isSound)
        }
    }

    /// Random bytes and mutations of valid inputs must give errors, never crashes, and apply nothing.
    @Test func decodersSurviveRandomAndMutatedInput() async throws {
        var random = SeededGenerator(seed: 99)
        try await withTemporaryStore(configuration: passphraseConfiguration("pw")) { source, _ async throws in
            source[.theme] = .dark
            try source.set("secret", for: .apiToken)
            source[.profile] = Profile(name: "x", tags: ["a"], scores: ["b": 1], nested: nil)
            let valid = Array(try source.exportRange(after: 0))
            let event = try EventRange(decoding: valid).events[0]
            let validEvent = event.encoded()
            let validEntry = ViewEntry(event: event, sequence: 1).encoded()
            try await withTemporaryStore { target, _ async throws in
                for round in 0..<3_000 {
                    var bytes: [UInt8]
                    switch round % 4 {
                    case 0: bytes = (0..<Int.random(in: 0..<200, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                    case 1:
                        bytes = valid
                        for _ in 0..<Int.random(in: 1...8, using: &random) {
                            bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                        }
                    case 2: bytes = Array(valid.prefix(Int.random(in: 0..<valid.count, using: &random)))
                    default:
                        bytes = validEvent
                        bytes[Int.random(in: 0..<bytes.count, using: &random)] ^= UInt8.random(in: 1...255, using: &random)
                    }
                    _ = try? target.importRange(Data(bytes))
                    _ = try? Event(decoding: bytes)
                    _ = try? ViewEntry(decoding: bytes)
                    _ = try? WrappedKey(decoding: bytes)
                    _ = try? KeyBundle.decode(bytes)
                    _ = try? Envelope(decoding: bytes)
                    var entry = validEntry
                    entry[Int.random(in: 0..<entry.count, using: &random)] ^= 0xFF
                    _ = try? ViewEntry(decoding: entry)
                }
                // Only the valid range could have applied anything (mutations almost never survive the checksum).
                #expect(try target.verify().isSound)
                #expect(try target.logEntries().count <= 3)
            }
        }
    }

    @Test func valueDecoderSurvivesMismatchedPayloads() async throws {
        var random = SeededGenerator(seed: 7)
        for _ in 0..<2_000 {
            let payload = (0..<Int.random(in: 0..<24, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            let encoding = UInt8.random(in: 0...12, using: &random)
            _ = try? ValueCoder.decode(Int.self, encoding: encoding, payload: payload, key: "k")
            _ = try? ValueCoder.decode(Int8.self, encoding: encoding, payload: payload, key: "k")
            _ = try? ValueCoder.decode(String.self, encoding: encoding, payload: payload, key: "k")
            _ = try? ValueCoder.decode(Theme.self, encoding: encoding, payload: payload, key: "k")
            _ = try? ValueCoder.decode(Profile?.self, encoding: encoding, payload: payload, key: "k")
            _ = try? ValueCoder.decode(URL.self, encoding: encoding, payload: payload, key: "k")
            _ = try? ValueCoder.decode(Date.self, encoding: encoding, payload: payload, key: "k")
            _ = ValueCoder.jsonText(encoding: encoding, payload: payload)
        }
    }
}
