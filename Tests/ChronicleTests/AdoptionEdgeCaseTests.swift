@_spi(Tools) @testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Synchronization
import Testing

/// Coming from UserDefaults at its edges: renames under concurrent writes, imports, observers, value types.
struct AdoptionEdgeCaseTests {
    /// Values from `stream` until `stop`, or whatever arrived when `seconds` pass (a bound that
    /// tells a stream that never delivers from a loaded machine, not a measurement).
    func gather<S: AsyncSequence<V, Never> & Sendable, V: Sendable>(
        _ stream: S, seconds: Double = 30, until stop: @escaping @Sendable ([V]) -> Bool
    ) async -> [V] {
        let box = Mutex<[V]>([])
        let reader = Task {
            for await value in stream {
                let done = box.withLock { values in
                    values.append(value)
                    return stop(values)
                }
                if done { return }
            }
        }
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline, !stop(box.withLock { $0 }) {
            try? await Task.sleep(for: .milliseconds(20))
        }
        reader.cancel()
        _ = await reader.value
        return box.withLock { $0 }
    }

    func withDefaultsSuite(_ body: (UserDefaults) throws -> Void) throws {
        let name = "chronicle.review15.\(UUID().uuidString)"
        let defaults = try #require(UserDefaults(suiteName: name))
        defer { defaults.removePersistentDomain(forName: name) }
        try body(defaults)
    }

    // MARK: - changes(after:)

    /// A live stream goes silent after a compaction: the log is renumbered from 1, the
    /// iterator's cursor stays at the old head, so every new event (sequence <= cursor) is
    /// skipped until the log grows past it.
    @Test func aLiveChangeStreamHearsCommitsAfterACompaction() async throws {
        try await withTemporaryStore { store, _ async throws in
            let counter = Key<Int>("counter", default: 0, sync: .automaticSmall)
            for i in 1...50 { try store.set(i, for: counter) }
            let stream = store.changes(after: 0)
            let heard = Task { await gather(stream, seconds: 30) { $0.contains { $0.key == "after" } } }
            try await Task.sleep(for: .milliseconds(300))  // the stream has read all 50 and waits
            #expect(try store.compact().dropped == 49)
            try store.set("new", for: Key<String>("after", default: "", sync: .automaticSmall))
            let values = await heard.value
            #expect(values.contains { $0.key == "after" }, "the stream missed the event committed after the compaction")
        }
    }

    // MARK: - renameKey

    /// renameKey reads the old value, then commits set(new) + remove(old) in another step: a
    /// write of the old name landing in between is removed and never carried over (lost).
    @Test func renameNeverLosesAConcurrentWriteOfTheOldName() async throws {
        try await withTemporaryStore { store, _ async throws in
            let old = Key<Int?>("old", sync: .automaticSmall)
            let stop = Atomic<Bool>(false)
            store[old] = 0
            let writer = Thread {
                var i = 1
                while !stop.load(ordering: .relaxed) {
                    store[old] = i
                    i += 1
                    Thread.sleep(forTimeInterval: 0.001)  // an app writing the old name now and then
                }
            }
            writer.start()
            for _ in 0..<200 { _ = try store.renameKey(from: "old", to: "new") }
            stop.store(true, ordering: .relaxed)
            try await store.flush()
            // Replay the log: each rename (set new, then remove old, adjacent) must carry the old
            // name's value at that point.
            var current: String?
            var lost = 0
            let entries = try store.logEntries()
            // Only renames remove "old", and "new" is only ever written by renames, so "old" always
            // holds the newer value: each remove of a value must follow a set of "new" to it.
            for (index, entry) in entries.enumerated() where entry.key == "old" {
                if entry.operation == .remove, let value = current {
                    let previous = index > 0 ? entries[index - 1] : nil
                    if !(previous?.key == "new" && previous?.operation == .set && previous?.valueJSON == value) { lost += 1 }
                }
                current = entry.operation == .set ? entry.valueJSON : nil
            }
            #expect(lost == 0, "\(lost) writes of the old name were removed by a rename without being carried over")
        }
    }

    // MARK: - imports

    /// A date inside an array with a non-finite interval (a binary plist stores a date as any
    /// float64): JSON numbers cannot hold it. On Linux the import is refused with a misleading
    /// "not a property list value"; on Apple platforms `JSONSerialization.data(withJSONObject:)`
    /// raises an Objective-C exception for NaN/inf, which `try?` does not catch: a crash.
    @Test func aNonFiniteDateInsideACollectionImports() throws {
        try withTemporaryStore { store, directory throws in
            let file = directory.appendingPathComponent("dates.plist")
            let list: [Any] = [Date(timeIntervalSinceReferenceDate: .infinity), Date(timeIntervalSinceReferenceDate: 5)]
            try PropertyListSerialization.data(fromPropertyList: ["dates": list], format: .binary, options: 0).write(to: file)
            #expect(try store.importPropertyList(at: file) == 1)
            #expect(store[Key<[Date]>("dates", default: [], sync: .automaticSmall)] == list as? [Date])
        }
    }

    /// Registered defaults (the registration domain: values the app ships, never set by the
    /// user) are imported as if set: they then outrank the Chronicle key's own default forever and
    /// replicate to every device.
    /// Foundation exposes the registration domain on Apple platforms only (on Linux
    /// `volatileDomain(forName: registrationDomain)` is empty): the README says to import first there.
    @Test(.enabled(if: canSeeRegisteredDefaults())) func registeredDefaultsAreNotImported() throws {
        try withDefaultsSuite { defaults in
            defaults.register(defaults: ["launches": 5, "theme": "system"])
            defaults.set("dark", forKey: "theme")
            try withTemporaryStore { store, _ throws in
                #expect(try store.importValues(from: defaults, names: ["launches", "theme"]) == 1)
                #expect(!store.hasValue(for: Key<Int>("launches", default: 0, sync: .automaticSmall)), "a registered default is no user value")
            }
        }
    }

    // MARK: - display of hostile payloads

    /// Every event's `valueJSON` is computed for `logEntries`, `chronicle log` and every element
    /// of `changes(after:)`: a date payload a peer (or the app) wrote with an extreme interval
    /// must print, not crash, and what prints must set back.
    @Test(arguments: [Double.nan, .infinity, -.infinity, 1e300, -1e300, 1e12])
    func extremeDatesPrintAndSetBack(interval: Double) throws {
        try withTemporaryStore { store, _ throws in
            let key = Key<Date?>("when", sync: .automaticSmall)
            try store.set(Date(timeIntervalSinceReferenceDate: interval), for: key)
            let printed = try #require(try store.currentValueJSON(forKeyNamed: key.name))
            #expect(try store.logEntries().last?.valueJSON == printed)
            try store.setValue(fromText: printed, forKeyNamed: key.name, as: .date)
        }
    }

    /// The stream is the log, not the values: a replicated event older on the clock than the
    /// key's current value arrives after it, and a consumer that projects changes in stream order
    /// (the README's `project(change)`) ends with a value the store does not hold. Nothing in
    /// `LogEntry` says the event lost.
    @Test func projectingTheStreamInOrderGivesTheStoresValues() async throws {
        try await withTemporaryStores(2) { stores in
            let (a, b) = (stores[0], stores[1])
            let key = Key<String>("theme.name", default: "", sync: .automaticSmall)
            try a.set("older", for: key)
            try await Task.sleep(for: .milliseconds(5))
            try b.set("newer", for: key)
            try await Replicator(store: b, peers: [.store(a)]).sync()
            #expect(b[key] == "newer")
            let heard = await gather(b.changes(after: 0), seconds: 30) { $0.count == 2 }
            var projected: [String: String] = [:]
            for change in heard where change.operation == .set && change.isCurrent { projected[change.key] = try change.value(as: String.self) }
            #expect(heard.filter(\.isCurrent).count == 1, "the older replicated event says it is not current")
            #expect(projected[key.name] == b[key], "the projection holds \(projected[key.name] ?? "nil"), the store \(b[key])")
        }
    }
}

/// Whether this Foundation shows what `register(defaults:)` registered.
func canSeeRegisteredDefaults() -> Bool {
    let name = "chronicle.tests.registration.\(UUID().uuidString)"
    guard let defaults = UserDefaults(suiteName: name) else { return false }
    defer { defaults.removePersistentDomain(forName: name) }
    defaults.register(defaults: ["probe": 1])
    return defaults.volatileDomain(forName: UserDefaults.registrationDomain)["probe"] != nil
}
