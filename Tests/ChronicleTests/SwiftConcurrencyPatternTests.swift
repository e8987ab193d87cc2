import Chronicle
import ChronicleTesting
import Foundation
import Synchronization
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
            // Waited for as SwiftUI would: Observation says when the value changed (a hang guard of 30 s).
            let seen = await finishes(Task { @MainActor in await untilObserved { model.theme.value == .dark } })
            #expect(seen)
            #expect(await model.theme.value == .dark)
            await MainActor.run { model.launches = 2 }
            #expect(store[.launches] == 2)
        }
    }
    #endif
}

#if canImport(Observation)
/// Returns once `condition` holds, checking it again each time Observation reports a change of
/// what it read (`withObservationTracking`), never on a timer.
@MainActor func untilObserved(_ condition: @escaping @MainActor () -> Bool) async {
    /// Resumes a continuation once, whether the change or the check comes first.
    final class Once: Sendable {
        let done = Atomic(false)
        func first() -> Bool { done.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged }
    }
    var holds = false
    while !holds {
        holds = await withCheckedContinuation { (resume: CheckedContinuation<Bool, Never>) in
            let once = Once()
            let now = withObservationTracking { condition() } onChange: {
                if once.first() { resume.resume(returning: false) }
            }
            if now, once.first() { resume.resume(returning: true) }
        }
    }
}
#endif
