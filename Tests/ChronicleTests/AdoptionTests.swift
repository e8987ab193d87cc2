@_spi(Tools) import Chronicle
import ChronicleTesting
import Foundation
import Testing

/// What a developer coming from UserDefaults meets in the first week.
struct AdoptionTests {
    /// What `get` prints, fed back to `set` (without a type), reads the same through the app's key.
    @Test func whatGetPrintsSetsTheSameValueBack() throws {
        try withTemporaryStore { store, _ throws in
            func roundTrip<V: Codable & Sendable & Equatable>(_ value: V, _ kind: ValueKind? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws {
                let key = Key<V?>("round.\(UUID().uuidString)")
                try store.set(value, for: key)
                let printed = try #require(try KeysByName(store).currentValueJSON(forKeyNamed: key.name))
                try store.remove(key)
                try KeysByName(store).setValue(fromText: printed, forKeyNamed: key.name, as: kind)
                #expect(try store.value(for: key) == value, "\(V.self) printed as \(printed)", sourceLocation: sourceLocation)
            }
            for kind in [nil, ValueKind.date] { try roundTrip(Date(timeIntervalSinceReferenceDate: 123_456.25), kind) }
            for kind in [nil, ValueKind.data] { try roundTrip(Data([0, 1, 2, 254, 255]), kind) }
            for kind in [nil, ValueKind.url] { try roundTrip(URL(string: "https://example.com/a b".addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed)!)!, kind) }
            for kind in [nil, ValueKind.double] { try roundTrip(Double.infinity, kind); try roundTrip(-0.1, kind) }
            for kind in [nil, ValueKind.string] { try roundTrip("42", kind); try roundTrip("say \"hi\"\n", kind) }
            for kind in [nil, ValueKind.int] { try roundTrip(UInt64.max, kind); try roundTrip(Int64.min, kind) }
            for kind in [nil, ValueKind.bool] { try roundTrip(true, kind) }
            for kind in [nil, ValueKind.json] { try roundTrip([1.5, .infinity, -.infinity], kind); try roundTrip(["a": [1, 2]], kind) }
            try roundTrip(Float(1.1))
            try roundTrip(Theme.dark)
        }
    }

    /// Arrays and dictionaries holding infinities and NaN (UserDefaults stores them; JSON refused them).
    @Test func nonFiniteNumbersInsideCollections() throws {
        try withTemporaryStore { store, _ throws in
            let list = Key<[Double]>("list", default: [])
            try store.set([1.5, .infinity, -.infinity], for: list)
            #expect(store[list] == [1.5, .infinity, -.infinity])
            let map = Key<[String: Float]>("map", default: [:])
            try store.set(["up": .infinity, "nan": .nan], for: map)
            #expect(store[map]["up"] == .infinity)
            #expect(store[map]["nan"]?.isNaN == true)
            let strings = Key<[String]>("strings", default: [])
            try store.set(["Infinity", "NaN"], for: strings)
            #expect(store[strings] == ["Infinity", "NaN"], "strings stay strings")
        }
    }

    /// A relative URL used to come back absolute, no longer equal to what was stored.
    @Test func relativeURLsComeBackEqual() throws {
        try withTemporaryStore { store, _ throws in
            let key = Key<URL?>("url")
            for url in [
                URL(fileURLWithPath: "docs/readme.md"), URL(string: "b/c?d", relativeTo: URL(string: "https://example.com/a/"))!,
                URL(string: "plain/relative")!, URL(string: "https://example.com")!,
            ] {
                try store.set(url, for: key)
                let read = try #require(store[key])
                #expect(read == url)
                #expect(read.absoluteString == url.absoluteString)
            }
        }
    }
}
