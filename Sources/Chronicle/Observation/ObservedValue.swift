import ChronicleFormat
#if canImport(Observation)
public import Observation

/// An `Observable` view of one key, for SwiftUI and `@Observable` models.
///
/// A property wrapper inside an `@Observable` class is invisible to
/// observation (it has to be `@ObservationIgnored`). Hold an `ObservedValue`
/// instead: reading ``value`` registers the access, and every change of the
/// key — from this process, another store or another process — is a mutation.
///
/// ```swift
/// @Observable final class SettingsModel {
///     let theme = ObservedValue(.theme)          // Store.standard
/// }
/// // SwiftUI: Text(model.theme.value.rawValue); Toggle(isOn: $model.flag.value) …
/// ```
///
/// Updates arrive on the main actor.
@MainActor
public final class ObservedValue<Value: Codable & Sendable>: Observable {
    private let registrar = ObservationRegistrar()
    private var current: Value
    private let write: @Sendable (Value) -> Void
    private var task: Task<Void, Never>?

    /// A value that starts at `initial`, follows `updates`, and hands each assignment to `write`
    /// (a store's observing initializer is in `Store/`: observation never names the store).
    init(initial: Value, updates: AsyncStream<Value>, write: @escaping @Sendable (Value) -> Void) {
        current = initial
        self.write = write
        task = Task { [weak self] in
            for await value in updates {
                guard let self else { return }
                self.apply(value)
            }
        }
    }

    isolated deinit {
        task?.cancel()
    }

    /// The key's current value. Reading it is tracked by Observation; setting it writes to the store.
    public var value: Value {
        get {
            registrar.access(self, keyPath: \.value)
            return current
        }
        set {
            write(newValue)
            apply(newValue)
        }
    }

    private func apply(_ value: Value) {
        registrar.withMutation(of: self, keyPath: \.value) {
            current = value
        }
    }
}
#endif
