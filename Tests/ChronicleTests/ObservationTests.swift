@testable import Chronicle
import ChronicleTesting
import Foundation
import Observation
import Synchronization
import Testing

/// Collects values from `stream` until `stop` says so (or a generous deadline passes, which fails the test).
func collect<V: Sendable>(
    _ stream: AsyncStream<V>, until stop: @escaping @Sendable ([V]) -> Bool,
    sourceLocation: SourceLocation = #_sourceLocation
) async -> [V] {
    let collected = await withTaskGroup(of: [V]?.self) { group in
        group.addTask {
            var values: [V] = []
            for await value in stream {
                values.append(value)
                if stop(values) { return values }
            }
            return values
        }
        group.addTask {
            try? await Task.sleep(for: .seconds(30))
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
    guard let collected else {
        Issue.record("the expected updates did not arrive", sourceLocation: sourceLocation)
        return []
    }
    return collected
}


struct SettingsValue {
    let store: Store
    @Default<Int> var launches: Int

    init(store: Store) {
        self.store = store
        _launches = Default(.launches, store: store)
    }
}

struct WrapperTests {
    @Test func wrappersInClassesAndStructs() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, _ throws in
            final class Model {
                @Default<Theme> var theme: Theme
                @Secret<String?> var token: String?
                @Default<Bool> var flag: Bool
                @Secret<String?> var legacy: String?
                init(store: Store) {
                    _theme = Default(.theme, store: store)
                    _token = Secret(.apiToken, store: store)
                    _flag = Default(wrappedValue: false, "legacy.flag", store: store)
                    _legacy = Secret("legacy.secret", store: store)
                }
            }
            let model = Model(store: store)
            #expect(model.theme == .system && model.token == nil && model.flag == false && model.legacy == nil)
            model.theme = .dark
            model.token = "t"
            model.flag = true
            model.legacy = "l"
            #expect(store[.theme] == .dark)
            #expect(store[.apiToken] == "t")
            #expect(store[Key<Bool>("legacy.flag", default: false)] == true)
            #expect(store[SecretKey<String?>("legacy.secret")] == "l")

            let value = SettingsValue(store: store)
            value.launches = 5  // nonmutating set on a `let` struct
            #expect(store[.launches] == 5)

            // A second wrapper on the same key sees the first one's write.
            let other = Model(store: store)
            #expect(other.theme == .dark)
        }
    }

    @Test func projectionResetHistoryAndBinding() throws {
        try withTemporaryStore { store, _ throws in
            let theme = Default(.theme, store: store)
            theme.wrappedValue = .dark
            theme.projectedValue.set(.light)
            #expect(theme.projectedValue.get() == .light)
            #expect(try theme.projectedValue.history.map(\.value) == [.dark, .light])
            theme.projectedValue.reset()
            #expect(theme.wrappedValue == .system)
            #expect(try theme.projectedValue.history.last?.isRemoval == true)
        }
    }
}

struct ObservationTests {
    @Test func updatesStartWithTheCurrentValueThenEveryChangeWithoutRepeats() async throws {
        try await withTemporaryStore { store, _ async throws in
            store[.theme] = .dark
            let stream = store.updates(of: .theme)
            let writer = Task {
                store[.theme] = .dark  // unchanged: not repeated
                store[.theme] = .light
                try store.remove(.theme)
            }
            let values = await collect(stream) { $0.last == .system }
            try await writer.value
            #expect(values == [.dark, .light, .system])
        }
    }

    @Test func everyObserverHearsEveryChange() async throws {
        try await withTemporaryStore { store, directory async throws in
            let second = try Store(directory: directory)
            let first = Default(.launches, store: store).projectedValue.updates
            let other = Default(.launches, store: second).projectedValue.updates
            let many = (0..<10).map { _ in store.updates(of: .launches) }
            let writer = Task {
                for i in 1...5 { second[.launches] = i }  // written through another Store on the directory
            }
            let a = await collect(first) { $0.last == 5 }
            let b = await collect(other) { $0.last == 5 }
            await writer.value
            #expect(a == [0, 1, 2, 3, 4, 5])
            #expect(b == [0, 1, 2, 3, 4, 5])
            for stream in many {
                #expect(await collect(stream) { $0.last == 5 }.last == 5)
            }
        }
    }

    @Test func updatesFromAnotherProcess() async throws {
        try await withTemporaryStore { store, directory async throws in
            let stream = store.updates(of: .theme)
            let result = try await runChronicle(["set", "settings.theme", "dark", "--store", directory.path])
            #expect(result.status == 0, "\(result.stderr)")
            let values = await collect(stream) { $0.last == .dark }
            #expect(values == [.system, .dark])
        }
    }

    @Test func secretUpdatesAreDecrypted() async throws {
        try await withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, _ async throws in
            let stream = store.updates(of: .apiToken)
            try store.set("one", for: .apiToken)
            let values = await collect(stream) { $0.last == "one" }
            #expect(values.last == "one")
        }
    }

    @Test func cancellingAnObservationReleasesIt() async throws {
        try await withTemporaryStore { store, _ async throws in
            let eventLog = try store.eventLog
            let task = Task {
                for await _ in store.updates(of: .theme) {}
            }
            while eventLog.observers.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
            #expect(eventLog.poller.withLock { $0 != nil })
            task.cancel()
            await task.value
            #expect(eventLog.observers.isEmpty)
            // The poller notices that nobody listens and stops.
            while eventLog.poller.withLock({ $0 != nil }) { try await Task.sleep(for: .milliseconds(50)) }
        }
    }

    @MainActor
    @Test func observedValueDrivesObservation() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try Store(directory: directory)
        let model = ObservedValue(.theme, store: store)
        #expect(model.value == .system)
        let changed = Mutex(false)
        withObservationTracking {
            _ = model.value
        } onChange: {
            changed.withLock { $0 = true }
        }
        let writer = try Store(directory: directory)
        writer[.theme] = .dark  // a change made elsewhere reaches the observable model
        while !changed.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        while model.value != .dark { try await Task.sleep(for: .milliseconds(10)) }
        model.value = .light
        #expect(store[.theme] == .light)
    }
}
