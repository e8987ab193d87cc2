@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Observation
import Synchronization
import Testing

struct ObservationTests {
    /// A channel is closed, and its handler leaves the observer hub, when its last observer
    /// goes, also when its key's default is a collection whose encoding varies by instance.
    @Test func everyChannelClosesWhenItsLastObserverGoes() async throws {
        try await withTemporaryStore { store, _ async throws in
            let elements = Set((0..<50).map { "element \($0)" })
            let keys = [Key<Set<String>>("channel.set", default: elements), Key<Set<String>>("channel.set", default: elements)]
            let observers = keys.map { key in
                let updates = store.updates(of: key)
                return Task { for await value in updates { return value } ; return [] }
            }
            for observer in observers { #expect(await observer.value == elements) }
            // The channels close as the observers' streams end: waited for, with a hang guard.
            let closed = await finishes(Task { await store.channels.waitUntilEmpty() })
            #expect(closed, "a channel outlived its observers")
            #expect(try store.eventLog.observers.isEmpty)
        }
    }

    /// Observers of one name and value type share a channel, which kept the first key's default
    /// and former names: an observer of a key declared with another default heard the first
    /// key's, and one with former names heard no value under them, where reads showed both.
    @Test func observersOfOneNameWithAnotherDefaultOrFormerNamesHearTheirOwnKeysValue() async throws {
        try await withTemporaryStore { store, _ async throws in
            let plain = Key<Int>("channel.shared", default: 0)
            let otherDefault = Key<Int>("channel.shared", default: 5)
            let renamed = Key<Int>("channel.shared", default: 0, formerNames: ["channel.old"])
            try store.set(9, for: Key<Int>("channel.old", default: 0))
            let first = store.updates(of: plain)
            let second = store.updates(of: otherDefault)
            let third = store.updates(of: renamed)
            #expect((store[plain], store[otherDefault], store[renamed]) == (0, 5, 9))
            #expect(await firstElement(of: first) { _ in true } == 0)
            #expect(await firstElement(of: second) { _ in true } == 5)
            #expect(await firstElement(of: third) { _ in true } == 9)
        }
    }


    /// A `Set` encodes its elements in varying order: observers used to hear an equal set again.
    @Test func anEqualSetIsNotHeardAgain() async throws {
        try await withTemporaryStore { store, _ async throws in
            let tags = Key<Set<Int>>("tags", default: [], sync: .automaticSmall)
            let updates = store.updates(of: tags)
            let small = Set(1...40)
            var large = Set<Int>(minimumCapacity: 4_096)  // the same elements, another iteration order
            for n in (1...40).reversed() { large.insert(n) }
            try store.set(small, for: tags)
            try store.set(large, for: tags)
            store[Key<Int>("other", default: 0, sync: .automaticSmall)] = 1  // other keys' commits wake nothing here
            try store.set([7], for: tags)
            let heard = await collect(updates) { $0.last == [7] }
            #expect(heard == [[], small, [7]])
        }
    }
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

    /// Cancelling observers while the hub hands them values must not deadlock (a consumer's
    /// cancellation and a delivery each hold one lock the other wants, if values are handed
    /// out under the channel's lock).
    @Test func observersCancelledWhileValuesFlow() async throws {
        try await withTemporaryStore { store, _ async throws in
            for round in 0..<5 {
                let streams = (0..<50).map { _ in store.updates(of: .launches) }
                let observers = streams.map { stream in
                    Task.detached { for await _ in stream {} }
                }
                for i in 0..<40 { try store.set(round * 40 + i, for: .launches) }
                for observer in observers { observer.cancel() }
                for observer in observers { await observer.value }
            }
            try store.set(-1, for: .launches)
            #expect(store[.launches] == -1)
            #expect(store.channels.isEmpty)  // every cancelled stream left its channel
        }
    }

    /// Values written faster than observers run are all heard, in order: each committed
    /// change is handed out from its own event, not re-read after the fact.
    @Test func observersHearEveryChangeOfAFastWriter() async throws {
        try await withTemporaryStore { store, _ async throws in
            let stream = store.updates(of: .launches)
            let writer = Task { for i in 1...300 { try store.set(i, for: .launches) } }
            let values = await collect(stream) { $0.last == 300 }
            try await writer.value
            #expect(values == Array(0...300))
        }
    }

    /// 100 concurrent writers of one key (durable and non-throwing forms mixed): every observer
    /// hears every value, in the order of the key's history (observers used to hear 72–84).
    @Test func observersHearEveryValueOfConcurrentWriters() async throws {
        try await withTemporaryStore { store, _ async throws in
            let key = Key<Int>("concurrent", default: 0, sync: .automaticSmall)
            let streams = (0..<5).map { _ in store.updates(of: key) }
            let writers = (1...100).map { value in
                Task.detached {
                    if value.isMultiple(of: 2) { store[key] = value } else { try store.set(value, for: key) }
                }
            }
            for writer in writers { try await writer.value }
            try await store.flush()
            let history = try store.history(of: key).compactMap(\.value)
            #expect(history.count == 100)
            for stream in streams {
                let heard = await collect(stream) { $0.count == 101 }
                #expect(heard == [0] + history)
            }
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
            let result = try await runChild(["set", directory.path, "settings.theme", "dark"])
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
            // The observation hands its current value once it is registered: wait for that.
            let (registered, register) = AsyncStream<Void>.makeStream()
            let task = Task {
                for await _ in store.updates(of: .theme) { register.finish() }
            }
            for await _ in registered {}
            #expect(!eventLog.observers.isEmpty)
            #expect(eventLog.poller.task.withLock { $0 != nil })
            task.cancel()
            await task.value
            #expect(eventLog.observers.isEmpty)
            // The poller notices at its next tick that nobody listens, and its task ends (waited
            // for, with the hang guard; it may have ended already).
            if let polling = eventLog.poller.task.withLock({ $0 }) {
                #expect(await finishes(Task { await polling.value }), "the poller kept running with nobody listening")
            }
            #expect(eventLog.poller.task.withLock { $0 == nil })
        }
    }

    @MainActor
    @Test func observedValueDrivesObservation() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try Store(directory: directory)
        let model = ObservedValue(.theme, store: store)
        #expect(model.value == .system)
        let (changes, changed) = AsyncStream<Void>.makeStream()
        withObservationTracking {
            _ = model.value
        } onChange: {
            changed.finish()
        }
        let writer = try Store(directory: directory)
        writer[.theme] = .dark  // a change made elsewhere reaches the observable model
        for await _ in changes {}  // Observation says the value changes (it is set right after)
        while model.value != .dark { await Task.yield() }
        model.value = .light
        #expect(store[.theme] == .light)
    }
}

