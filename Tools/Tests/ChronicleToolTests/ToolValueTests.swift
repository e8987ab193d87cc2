@_spi(Wire) @testable import Chronicle
@_spi(Wire) @testable import ChronicleFormat
import ChronicleTesting
import Foundation
import Testing
import ToolsTestSupport

/// `chronicle set`: what the tool writes, an app's typed keys read.
struct ToolValueTests {
    /// A store directory the `chronicle` tool writes first; the test opens it afterwards.
    func withToolWrittenStore(_ commands: [[String]], _ body: (Store, URL) async throws -> Void) async throws {
        let directory = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        for arguments in commands {
            let result = try await runChronicle(["set"] + arguments + ["--store", directory.path])
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
        }
        try await body(try Store(directory: directory), directory)
    }

    /// A value in an encoding this build does not know (a newer build wrote it) is not printed:
    /// `get` printed a placeholder string and exited 0, and `set` of what it printed replaced
    /// the value with that string. Now it says why on standard error and exits 2.
    @Test func getRefusesAValueInAnEncodingItCannotRead() async throws {
        let (source, target) = (temporaryStoreDirectory(), temporaryStoreDirectory())
        defer { for directory in [source, target] { try? FileManager.default.removeItem(at: directory) } }
        do {
            let writer = try Store(directory: source)
            try writer.set("from a newer build", for: Key<String>("newer.value", default: "", sync: .manual))
            var range = try EventRange(decoding: Array(try writer.exportRange(after: 0)))
            range.events = range.events.map { event in
                var newer = event
                newer.encoding = 200
                return newer
            }
            let targetStore = try Store(directory: target)
            let receipt = try targetStore.importRange(Data(range.encoded()))
            #expect(receipt.applied == 1, "\(receipt)")
        }
        let result = try await runChronicle(["get", "newer.value", "--store", target.path])
        #expect(result.status == 2)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("encoding 200"), "\(result.stderr)")
    }

    /// `chronicle set volume 1` used to leave a `Key<Double>` reading its default (and the same
    /// for Float, unsigned integers, URL, Date and Data keys).
    @Test func valuesTheToolWritesReadThroughTypedKeys() async throws {
        try await withToolWrittenStore([
            ["volume", "1"], ["ratio", "2.0"], ["big", "300"], ["home", "https://example.com/a?b=c"],
            ["when", "2026-11-22T09:30:00Z"], ["blob", "AAEC/w=="], ["max", "18446744073709551615"], ["scale", "1.1"],
        ]) { store, _ in
            #expect(store[Key<Double>("volume", default: 0)] == 1)
            #expect(store[Key<Float>("volume", default: 0)] == 1)
            #expect(store[Key<UInt8>("volume", default: 0)] == 1)
            #expect(store[Key<Int16>("volume", default: 0)] == 1)
            #expect(store[Key<Bool>("volume", default: false)] == true)
            #expect(store[Key<Int>("ratio", default: 0)] == 2)
            #expect(store[Key<Float>("scale", default: 0)] == 1.1)
            #expect(store[Key<Double>("scale", default: 0)] == 1.1)
            #expect(store[Key<Int>("scale", default: 0)] == 0, "1.1 is no integer: the default")
            #expect(throws: ChronicleError.self) { try store.value(for: Key<UInt8>("big", default: 0)) }
            #expect(store[Key<UInt16>("big", default: 0)] == 300)
            #expect(store[Key<UInt64>("max", default: 0)] == .max)
            #expect(store[Key<URL?>("home")] == URL(string: "https://example.com/a?b=c"))
            #expect(store[Key<Date?>("when")] == ISO8601DateFormatter().date(from: "2026-11-22T09:30:00Z"))
            #expect(store[Key<Data>("blob", default: Data())] == Data([0, 1, 2, 255]))
        }
    }

    /// `--type` stores what the app's key expects; a text that is not of the type is refused
    /// with what it should look like, and nothing is written.
    @Test func setWithATypeStoresThatType() async throws {
        try await withToolWrittenStore([
            ["flag", "yes", "--type", "bool"], ["volume", "5", "--type", "double"], ["code", "42", "--type", "string"],
            ["when", #""2026-11-22T09:30:00.250Z""#, "--type", "date"], ["home", "https://example.com/", "--type", "url"],
            ["blob", "AAEC/w==", "--type", "data"], ["list", "[1, 2]", "--type", "json"], ["count", "7", "--type", "int"],
        ]) { store, directory in
            #expect(store[Key<Bool>("flag", default: false)] == true)
            #expect(store[Key<Double>("volume", default: 0)] == 5)
            #expect(store[Key<String>("code", default: "")] == "42")
            #expect(store[Key<Date?>("when")]?.timeIntervalSince1970 == 1_795_339_800.25)
            #expect(store[Key<URL?>("home")] == URL(string: "https://example.com/"))
            #expect(store[Key<Data>("blob", default: Data())] == Data([0, 1, 2, 255]))
            #expect(store[Key<[Int]>("list", default: [])] == [1, 2])
            #expect(store[Key<Int>("count", default: 0)] == 7)
            let entries = try store.logEntries()
            #expect(entries.first { $0.key == "volume" }?.size == 8)
            #expect(entries.first { $0.key == "code" }?.valueJSON == #""42""#)

            let refused = try await runChronicle(["set", "when", "yesterday", "--type", "date", "--store", directory.path])
            #expect(refused.status == 2)
            #expect(refused.stderr.contains("ISO 8601"))
            let unknown = try await runChronicle(["set", "when", "1", "--type", "decimal", "--store", directory.path])
            #expect(unknown.status == 64)
            #expect(try store.logEntries().count == entries.count, "nothing written")
        }
    }
}
