import Chronicle
import ChronicleTesting
import Foundation
import Testing
#if canImport(Observation)
import Observation
#endif

/// The patterns the README shows for Swift 6 code compile and work: the blocking set in async
/// code, wrappers in a Sendable settings object, an `@Observable` model. (Compiling is half of
/// each test: these used to be compile errors.)
struct SwiftConcurrencyPatternTests {
    /// A settings object isolated to the main actor is Sendable, and may hold wrappers.
    @MainActor final class Settings {
        @Default var theme: Theme
        @Default var flag: Bool
        init(store: Store) {
            _theme = Default(.theme, store: store)
            _flag = Default(wrappedValue: false, "legacy.flag", store: store)
        }
    }

    /// A Sendable settings object off any actor: the wrappers as `let` values.
    final class SharedSettings: Sendable {
        let theme: Default<Theme>
        init(store: Store) { theme = Default(.theme, store: store) }
    }

    @Test func theBlockingSetCompilesInAsyncCode() async throws {
        try await withTemporaryStore { store, _ async throws in
            try store.set(.dark, for: .theme)  // the durable, blocking form: no `await`
            store[.launches] = 3
            try await store.flush()  // the durable form that suspends
            #expect(store[.theme] == .dark && store[.launches] == 3)
        }
    }

    @Test func wrappersLiveInSendableSettingsObjects() async throws {
        try await withTemporaryStore { store, _ async throws in
            let settings = await Settings(store: store)
            await MainActor.run { settings.theme = .light }
            let shared = SharedSettings(store: store)
            await Task.detached { shared.theme.wrappedValue = .dark }.value
            #expect(await settings.theme == .dark)
            #expect(await MainActor.run { settings.flag } == false)
        }
    }

    #if canImport(Observation)
    @Observable @MainActor final class Model {
        let theme: ObservedValue<Theme>
        @ObservationIgnored @Default var launches: Int  // compiles; not observed: use ObservedValue
        init(store: Store) {
            theme = ObservedValue(.theme, store: store)
            _launches = Default(.launches, store: store)
        }
    }

    @Test func anObservableModelSeesChanges() async throws {
        try await withTemporaryStore { store, _ async throws in
            let model = await Model(store: store)
            try store.set(.dark, for: .theme)
            let seen = await firstElement(of: AsyncStream<Theme> { continuation in
                Task { @MainActor in
                    for _ in 0..<10_000 where model.theme.value != .dark { try? await Task.sleep(for: .milliseconds(5)) }
                    continuation.yield(model.theme.value)
                    continuation.finish()
                }
            }) { _ in true }
            #expect(seen == .dark)
            await MainActor.run { model.launches = 2 }
            #expect(store[.launches] == 2)
        }
    }
    #endif
}
