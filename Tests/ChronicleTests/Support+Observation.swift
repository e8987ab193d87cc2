@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Observation
import Synchronization
import Testing

/// Collects values from `stream` until `stop` says so (or the hang guard passes, which fails the test).
func collect<S: AsyncSequence<V, Never> & Sendable, V: Sendable>(
    _ stream: S, until stop: @escaping @Sendable ([V]) -> Bool,
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
            // A guard, not a measurement: three suites at once on two cores once took over 90 s
            // to deliver an automatic push.
            try? await Task.sleep(for: hangGuard)
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

/// Values from `stream` until `stop`, or whatever arrived when `hangGuard` passes (which tells a
/// stream that never delivers from a loaded machine; not a measurement).
func gatherValues<S: AsyncSequence<V, Never> & Sendable, V: Sendable>(
    _ stream: S, until stop: @escaping @Sendable ([V]) -> Bool
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
    // The reader ends when `stop` holds; the bound only tells a stream that never delivers.
    _ = await finishes(reader)
    reader.cancel()
    _ = await reader.value
    return box.withLock { $0 }
}
