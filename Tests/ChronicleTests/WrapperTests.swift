@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Observation
import Synchronization
import Testing

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
