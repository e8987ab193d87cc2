@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import ChronicleLMDB
import Synchronization
import Testing

struct HostileInputTests {
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
