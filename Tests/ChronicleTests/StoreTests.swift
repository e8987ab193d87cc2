import Chronicle
import ChronicleTesting
import Foundation
import Testing

struct StoreTests {

    @Test func resetSeveralKeysAndAskWhetherAKeyHasAValue() throws {
        try withTemporaryStore { store, _ throws in
            #expect(!store.hasValue(for: .theme))
            store[.theme] = .dark
            store[.launches] = 3
            #expect(store.hasValue(for: .theme) && store.hasValue(for: .launches))
            try store.reset(.theme, .launches)
            #expect(!store.hasValue(for: .theme) && !store.hasValue(for: .launches))
            #expect(store[.theme] == Keys.theme.defaultValue && store[.launches] == 0)
            #expect(try store.history(of: .launches).map(\.value) == [3, nil])  // a tombstone each, in one transaction
            store[.theme] = .light
            store[.launches] = 4
            #expect(try store.removeAll(in: .defaults) == 2)  // .launches and .theme; the removed ones stay removed
            #expect(!store.hasValue(for: .theme) && !store.hasValue(for: .launches))
            #expect(try store.removeAll(in: .defaults) == 0)
        }
    }

    /// The non-throwing forms used to run a durable commit (two flushes) on the caller's thread,
    /// the main thread in an app. Now they return once the change is visible to this process,
    /// and `flush()` makes it durable.
    @Test func nonThrowingWritesAreVisibleAtOnceAndDurableAfterFlush() async throws {
        try await withTemporaryStore { store, directory async throws in
            let updates = store.updates(of: .launches)
            for n in 1...50 { store[.launches] = n }
            #expect(store[.launches] == 50)  // read back at once
            #expect(try store.value(for: .launches) == 50)
            let heard = await collect(updates) { $0.last == 50 }
            #expect(heard.last == 50)
            try await store.flush()
            // Another process reads the flushed value from the file.
            let get = try await runChild(["get", directory.path, Keys.launches.name])
            #expect(get.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "50")
            // The log holds every change, in order, once settled.
            #expect(try store.history(of: .launches).compactMap(\.value) == Array(1...50))
            // A durable set after non-throwing ones commits after them.
            store[.launches] = 51
            try store.set(52, for: .launches)
            #expect(try store.history(of: .launches).last?.value == 52)
            // The async durable form.
            try store.set(53, for: .launches)
            #expect(store[.launches] == 53)
        }
    }
    @Test func absentKeysReadTheirDefaultAndWriteNothing() throws {
        try withTemporaryStore { store, _ throws in
            #expect(store[.theme] == .system)
            #expect(store[.draft] == nil)
            #expect(try store.value(for: .launches) == 0)
            #expect(try store.logEntries().isEmpty)
            #expect(try store.history(of: .theme).isEmpty)
        }
    }

    @Test func setReadRemove() throws {
        try withTemporaryStore { store, _ throws in
            store[.theme] = .dark
            #expect(store[.theme] == .dark)
            try store.set(.light, for: .theme)
            #expect(try store.value(for: .theme) == .light)
            try store.remove(.theme)
            #expect(store[.theme] == .system)
            store[.draft] = "hello"
            #expect(store[.draft] == "hello")
            store[.draft] = nil  // nil on an optional key is a remove
            #expect(store[.draft] == nil)
            let history = try store.history(of: .draft)
            #expect(history.map(\.value) == ["hello", nil])
            #expect(history.map(\.isRemoval) == [false, true])
        }
    }

    @Test func historyListsEveryRevisionOldestFirst() throws {
        try withTemporaryStore { store, _ throws in
            for value in [Theme.dark, .light, .dark] { try store.set(value, for: .theme) }
            try store.remove(.theme)
            try store.set(.light, for: .theme)
            let history = try store.history(of: .theme)
            #expect(history.map(\.value) == [.dark, .light, .dark, nil, .light])
            #expect(history.map(\.sequence) == history.map(\.sequence).sorted())
            #expect(zip(history, history.dropFirst()).allSatisfy { $0.timestamp < $1.timestamp })
            let replica = try store.replicaID
            #expect(history.allSatisfy { $0.origin == replica && $0.isLocal })
            #expect(abs(history[0].date.timeIntervalSinceNow) < 300)
        }
    }

    @Test func batchesCommitAllOrNothing() throws {
        struct Cancelled: Error {}
        try withTemporaryStore { store, _ throws in
            try store.write { batch in
                batch[.launches] = 3
                batch[.theme] = .dark
                batch[.draft] = "x"
            }
            #expect(store[.launches] == 3 && store[.theme] == .dark && store[.draft] == "x")
            let before = try store.logEntries().count

            #expect(throws: Cancelled.self) {
                try store.write { batch in
                    batch[.launches] = 4
                    throw Cancelled()
                }
            }
            let tooLong = Key<Int>(String(repeating: "k", count: 256), default: 0)
            #expect(throws: ChronicleError.self) {
                try store.write { batch in
                    batch[.launches] = 5
                    batch[tooLong] = 1
                }
            }
            #expect(store[.launches] == 3)
            #expect(try store.logEntries().count == before)
        }
    }

    @Test func batchEventsShareOneTransactionButAreSeparateEvents() throws {
        try withTemporaryStore { store, _ throws in
            try store.write { batch in
                for i in 0..<100 { batch[Key<Int>("bulk.\(i)", default: -1)] = i }
            }
            #expect(try store.logEntries().count == 100)
            #expect(store[Key<Int>("bulk.42", default: -1)] == 42)
        }
    }

    @Test func invalidKeyNamesAreClearErrors() throws {
        try withTemporaryStore { store, _ throws in
            let empty = Key<Int>("", default: 1)
            let long = Key<Int>(String(repeating: "é", count: 128), default: 1)  // 256 UTF-8 bytes
            let longest = Key<Int>(String(repeating: "k", count: 255), default: 1)
            #expect(throws: ChronicleError.self) { try store.set(2, for: empty) }
            do {
                try store.set(2, for: long)
                Issue.record("a 256-byte name was accepted")
            } catch {
                guard case ChronicleError.invalidKeyName(_, let reason) = error else { Issue.record("wrong error \(error)"); return }
                #expect(reason.contains("256"))
            }
            #expect(store[long] == 1)  // the non-throwing read logs and gives the default
            try store.set(2, for: longest)
            #expect(store[longest] == 2)
            #expect(try store.logEntries().count == 1)
        }
    }

    @Test func undecodableStoredValueIsAClearError() throws {
        try withTemporaryStore { store, _ throws in
            try store.set("not a number", for: Key<String>("shape.changed", default: ""))
            let asInt = Key<Int>("shape.changed", default: 7)
            #expect(store[asInt] == 7)
            #expect {
                try store.value(for: asInt)
            } throws: { error in
                guard case ChronicleError.decodingFailed(let key, _) = error else { return false }
                return key == "shape.changed"
            }
            try store.set(Int(Int16.max) + 1, for: Key<Int>("narrow", default: 0))
            #expect(throws: ChronicleError.self) { try store.value(for: Key<Int16>("narrow", default: 0)) }
            try store.set("mauve", for: Key<String>("enum.raw", default: ""))
            #expect(throws: ChronicleError.self) { try store.value(for: Key<Theme>("enum.raw", default: .system)) }
        }
    }

    @Test func valuesOfSeveralMegabytes() throws {
        try withTemporaryStore { store, _ throws in
            let big = Data((0..<(6 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            let key = Key<Data>("blob", default: Data())
            try store.set(big, for: key)
            #expect(store[key] == big)
        }
        var configuration = Store.Configuration()
        configuration.maxValueSize = 1024
        try withTemporaryStore(configuration: configuration) { store, _ throws in
            let key = Key<Data>("blob", default: Data())
            #expect {
                try store.set(Data(count: 1025), for: key)
            } throws: { error in
                guard case ChronicleError.valueTooLarge(_, 1025, 1024) = error else { return false }
                return true
            }
            #expect(try store.logEntries().isEmpty)
        }
    }

    @Test func reopeningKeepsEverything() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let replica: ReplicaID
        do {
            let store = try Store(directory: directory)
            try store.set(.dark, for: .theme)
            try store.set(41, for: .launches)
            replica = try store.replicaID
        }
        let reopened = try Store(directory: directory)
        #expect(reopened[.theme] == .dark)
        #expect(reopened[.launches] == 41)
        #expect(try reopened.replicaID == replica)
        try reopened.set(42, for: .launches)
        #expect(try reopened.history(of: .launches).map(\.value) == [41, 42])
    }

    @Test func storesOnOneDirectoryShareOneEnvironment() throws {
        try withTemporaryStore { first, directory throws in
            let second = try Store(directory: directory)
            first[.theme] = .dark
            #expect(second[.theme] == .dark)
            second[.theme] = .light
            #expect(first[.theme] == .light)
            #expect(try first.replicaID == second.replicaID)
        }
    }

    @Test func renamedKeysReadTheirFormerName() throws {
        try withTemporaryStore { store, _ throws in
            store[Key<Theme>("old.theme", default: .system)] = .dark
            let renamed = Key<Theme>("new.theme", default: .system, formerNames: ["old.theme"])
            #expect(store[renamed] == .dark)
            store[renamed] = .light
            #expect(store[renamed] == .light)
            #expect(try store.history(of: renamed).count == 1)
        }
    }
}

/// What `print` shows of a revision, a log entry and a sync report: dates, not raw clock numbers.
struct ReadableDescriptionTests {
    @Test func revisionsEntriesAndReportsPrintDates() async throws {
        try await withTemporaryStores(2) { stores in
            let key = Key<String>("described", default: "", sync: .manual)
            try stores[0].set("shown", for: key)
            let year = String(Calendar(identifier: .gregorian).component(.year, from: Date()))
            let revision = try #require(try stores[0].history(of: key).last).description
            #expect(revision.contains("shown") && revision.contains("\(year)-") && revision.hasSuffix(")"), "\(revision)")
            let entry = try #require(try stores[0].logEntries().last).description
            #expect(entry.contains("\(year)-") && entry.contains("described") && entry.contains("\"shown\""), "\(entry)")
            let report = try await Replicator(store: stores[1], peers: [.store(stores[0])]).sync()
            #expect(report.description.contains("received 1 (applied 1"), "\(report.description)")
            let secret = SecretKey<String>("hidden", default: "")
            try await withTemporaryStore(configuration: passphraseConfiguration("pw")) { store, _ async throws in
                try store.set("never printed", for: secret)
                #expect(try !store.history(of: secret).description.contains("never printed"))
                #expect(try !store.logEntries().description.contains("never printed"))
            }
        }
    }
}
