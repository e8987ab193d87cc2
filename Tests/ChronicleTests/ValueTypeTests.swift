@_spi(Tools) import Chronicle
import ChronicleTesting
import Foundation
import Testing

struct ValueTypeTests {
    func roundTrip<V: Codable & Sendable & Equatable>(_ value: V, default defaultValue: V, in store: Store) throws {
        let key = Key<V>("value.\(V.self).\(UUID().uuidString)", default: defaultValue)
        #expect(store[key] == defaultValue)
        try store.set(value, for: key)
        #expect(try store.value(for: key) == value, "\(V.self)")
        #expect(try store.history(of: key).last?.value == value)
    }

    @Test func primitivesRoundTrip() throws {
        try withTemporaryStore { store, _ throws in
            try roundTrip(true, default: false, in: store)
            try roundTrip(false, default: true, in: store)
            try roundTrip(Int.min, default: 0, in: store)
            try roundTrip(Int8.min, default: 0, in: store)
            try roundTrip(Int16.max, default: 0, in: store)
            try roundTrip(Int32.min, default: 0, in: store)
            try roundTrip(Int64.max, default: 0, in: store)
            try roundTrip(UInt.max, default: 0, in: store)
            try roundTrip(UInt8.max, default: 0, in: store)
            try roundTrip(UInt16.max, default: 0, in: store)
            try roundTrip(UInt32.max, default: 0, in: store)
            try roundTrip(UInt64.max, default: 0, in: store)
            try roundTrip(Double.pi, default: 0, in: store)
            try roundTrip(-Double.infinity, default: 0, in: store)
            try roundTrip(Float(1.5), default: 0, in: store)
            try roundTrip("héllo, 世界 🌍", default: "", in: store)
            try roundTrip("", default: "x", in: store)
            try roundTrip(Data([0, 1, 2, 255]), default: Data(), in: store)
            try roundTrip(Date(timeIntervalSinceReferenceDate: 123_456.789), default: .distantPast, in: store)
            try roundTrip(URL(string: "https://example.com/a?b=c#d")!, default: URL(fileURLWithPath: "/"), in: store)
            try roundTrip(Theme.dark, default: .system, in: store)
            try roundTrip(Level.high, default: .low, in: store)
        }
    }

    @Test func primitivesUseTheBinaryFastPath() throws {
        try withTemporaryStore { store, _ throws in
            try store.set(.dark, for: .theme)
            try store.set(12, for: .launches)
            let entries = try store.logEntries()
            #expect(entries.map(\.size) == [4, 8])  // "dark" as UTF-8, Int as 8 bytes: no JSON
        }
    }

    @Test func optionalsArraysDictionariesAndStructs() throws {
        try withTemporaryStore { store, _ throws in
            try roundTrip([1, 2, 3], default: [], in: store)
            try roundTrip(["a": 1.5, "b": -2], default: [:], in: store)
            try roundTrip([Theme.dark, .light], default: [], in: store)
            try roundTrip(Optional<Int>.some(5), default: nil, in: store)
            try roundTrip(Optional<Theme>.some(.light), default: nil, in: store)
            let profile = Profile(name: "Ada", tags: ["x", "y"], scores: ["math": 10], nested: .init(on: true))
            try roundTrip(profile, default: Profile(name: "", tags: [], scores: [:], nested: nil), in: store)
            store[.profile] = profile
            #expect(store[.profile] == profile)
            store[.profile] = nil
            #expect(store[.profile] == nil)
        }
    }
}

// MARK: - Display of hostile payloads

extension ValueTypeTests {
    /// Every event's `valueJSON` is computed for `logEntries`, `chronicle log` and every element
    /// of `changes(after:)`: a date payload a peer (or the app) wrote with an extreme interval
    /// must print, not crash, and what prints must set back.
    @Test(arguments: [Double.nan, .infinity, -.infinity, 1e300, -1e300, 1e12])
    func extremeDatesPrintAndSetBack(interval: Double) throws {
        try withTemporaryStore { store, _ throws in
            let key = Key<Date?>("when", sync: .automaticSmall)
            try store.set(Date(timeIntervalSinceReferenceDate: interval), for: key)
            let printed = try #require(try KeysByName(store).currentValueJSON(forKeyNamed: key.name))
            #expect(try store.logEntries().last?.valueJSON == printed)
            try KeysByName(store).setValue(fromText: printed, forKeyNamed: key.name, as: .date)
        }
    }
}
