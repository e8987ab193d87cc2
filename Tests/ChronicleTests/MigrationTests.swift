@_spi(Tools) import Chronicle
import ChronicleTesting
import Foundation
import Synchronization
import Testing

/// Ways in for existing data, renames as events, migration steps that run once.
struct MigrationTests {
    /// A UserDefaults suite of every property-list type; deleted afterwards.
    func withDefaultsSuite(_ body: (UserDefaults) throws -> Void) throws {
        let name = "chronicle.tests.\(UUID().uuidString)"
        let defaults = try #require(UserDefaults(suiteName: name))
        defer { defaults.removePersistentDomain(forName: name) }
        try body(defaults)
    }

    @Test func importFromUserDefaultsIsReadableByTypedKeysAndIdempotent() throws {
        try withDefaultsSuite { defaults in
            defaults.set(true, forKey: "flag")
            defaults.set(42, forKey: "launches")
            defaults.set(0.75, forKey: "volume")
            defaults.set("dark", forKey: "theme")
            defaults.set(Date(timeIntervalSinceReferenceDate: 1_000), forKey: "installed")
            defaults.set(Data([1, 2, 3]), forKey: "blob")
            defaults.set([3, 1, 2], forKey: "order")
            defaults.set(["a": 1.5, "b": Double.infinity], forKey: "weights")
            defaults.set([Date(timeIntervalSinceReferenceDate: 5)], forKey: "dates")
            try withTemporaryStore { store, _ throws in
                let names = ["flag", "launches", "volume", "theme", "installed", "blob", "order", "weights", "dates", "absent"]
                #expect(try store.importValues(from: defaults, names: names) == 9)
                #expect(store[Key<Bool>("flag", default: false)] == true)
                #expect(store[Key<Int>("launches", default: 0)] == 42)
                #expect(store[Key<Double>("volume", default: 0)] == 0.75)
                #expect(store[Key<Theme>("theme", default: .system)] == .dark)
                #expect(store[Key<Date?>("installed")] == Date(timeIntervalSinceReferenceDate: 1_000))
                #expect(store[Key<Data>("blob", default: Data())] == Data([1, 2, 3]))
                #expect(store[Key<[Int]>("order", default: [])] == [3, 1, 2])
                #expect(store[Key<[String: Double]>("weights", default: [:])] == ["a": 1.5, "b": .infinity])
                #expect(store[Key<[Date]>("dates", default: [])] == [Date(timeIntervalSinceReferenceDate: 5)])
                #expect(!store.hasValue(for: Key<Int>("absent", default: 0)))

                let events = try store.logEntries().count
                #expect(try store.importValues(from: defaults, names: names) == 0, "a second run adds nothing")
                #expect(try store.logEntries().count == events)
                // The store holds the key now: a changed legacy value never overwrites it.
                defaults.set(43, forKey: "launches")
                #expect(try store.importValues(from: defaults, names: names) == 0)
                #expect(store[Key<Int>("launches", default: 0)] == 42)
            }
        }
    }

    /// A large property list reports its progress as values are checked, in order, ending at
    /// (all, all) once committed; the tool draws its progress line from it.
    @Test func importPropertyListReportsProgress() throws {
        try withTemporaryStore { store, directory throws in
            let values = Dictionary(uniqueKeysWithValues: (0..<5_000).map { ("imported.\($0)", $0) })
            let file = directory.appendingPathComponent("large.plist")
            try PropertyListSerialization.data(fromPropertyList: values, format: .binary, options: 0).write(to: file)
            var reports: [(Int, Int)] = []
            #expect(try store.importPropertyList(at: file) { reports.append(($0, $1)) } == 5_000)
            #expect(reports.count >= 5)
            #expect(reports.allSatisfy { $0.1 == 5_000 })
            #expect(zip(reports, reports.dropFirst()).allSatisfy { $0.0 <= $1.0 }, "never backwards")
            #expect(reports.last.map { $0 == (5_000, 5_000) } == true)
            #expect(store[Key<Int>("imported.4999", default: 0)] == 4_999)
        }
    }

    @Test func importPlistRefusalsWriteNothing() async throws {
        try await withTemporaryStore { store, directory async throws in
            let list = directory.appendingPathComponent("list.plist")
            try PropertyListSerialization.data(fromPropertyList: ["a", "b"], format: .xml, options: 0).write(to: list)
            #expect(throws: ChronicleError.self) { try store.importPropertyList(at: list) }
            let badName = directory.appendingPathComponent("badname.plist")
            try PropertyListSerialization.data(fromPropertyList: ["ok": 1, "": 2], format: .xml, options: 0).write(to: badName)
            #expect(throws: ChronicleError.self) { try store.importPropertyList(at: badName) }
            #expect(!store.hasValue(for: Key<Int>("ok", default: 0)), "all or nothing")
            #expect(try store.logEntries().isEmpty)
        }
    }

    /// A property list as UserDefaults writes its domains and `defaults export` writes them.
    static let exported = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0">
        <dict>
        	<key>NSWindow Frame main</key>
        	<string>10 10 800 600 0 0 1440 900 </string>
        	<key>flag</key>
        	<true/>
        	<key>launches</key>
        	<integer>7</integer>
        	<key>volume</key>
        	<real>1</real>
        	<key>installed</key>
        	<date>2026-11-22T09:30:00Z</date>
        	<key>blob</key>
        	<data>AAEC/w==</data>
        	<key>recent</key>
        	<array>
        		<string>a.txt</string>
        		<string>b.txt</string>
        	</array>
        	<key>window</key>
        	<dict>
        		<key>maximized</key>
        		<false/>
        		<key>width</key>
        		<integer>800</integer>
        	</dict>
        </dict>
        </plist>
        """

    struct Window: Codable, Equatable { var maximized: Bool; var width: Int }

    @Test(arguments: [PropertyListSerialization.PropertyListFormat.xml, .binary])
    func importPropertyListFile(format: PropertyListSerialization.PropertyListFormat) throws {
        try withTemporaryStore { store, directory throws in
            let object = try PropertyListSerialization.propertyList(from: Data(Self.exported.utf8), format: nil)
            let file = directory.appendingPathComponent("prefs.plist")
            try PropertyListSerialization.data(fromPropertyList: object, format: format, options: 0).write(to: file)
            #expect(try store.importPropertyList(at: file) == 8)
            #expect(store[Key<Bool>("flag", default: false)] == true)
            #expect(store[Key<Int>("launches", default: 0)] == 7)
            #expect(store[Key<Double>("volume", default: 0)] == 1)
            #expect(store[Key<Float>("volume", default: 0)] == 1)
            #expect(store[Key<Int>("volume", default: 0)] == 1, "a <real> 1 reads as an integer too")
            #expect(store[Key<Date?>("installed")] == ISO8601DateFormatter().date(from: "2026-11-22T09:30:00Z"))
            #expect(store[Key<Data>("blob", default: Data())] == Data([0, 1, 2, 255]))
            #expect(store[Key<[String]>("recent", default: [])] == ["a.txt", "b.txt"])
            #expect(store[Key<Window?>("window")] == Window(maximized: false, width: 800))
            #expect(store[Key<String>("NSWindow Frame main", default: "")].hasPrefix("10 10 800"))
            #expect(try store.importPropertyList(at: file) == 0, "a second run adds nothing")
        }
    }

    @Test func renameMovesTheValueAsEventsOnceAndKeepsANewerValue() throws {
        try withTemporaryStore { store, _ throws in
            let colour = Key<String?>("settings.colour")
            let color = Key<String?>("settings.color")
            store[colour] = "teal"
            #expect(try store.renameKey(from: "settings.colour", to: "settings.color"))
            #expect(store[color] == "teal")
            #expect(store[colour] == nil)
            let entries = try store.logEntries()
            #expect(entries.suffix(2).map(\.key) == ["settings.color", "settings.colour"])
            #expect(entries.suffix(2).map(\.operation) == [.set, .remove])
            #expect(try !store.renameKey(from: "settings.colour", to: "settings.color"), "idempotent")
            #expect(try store.logEntries().count == entries.count)

            store[colour] = "old"  // written again under the old name, then a newer value under the new one
            store[color] = "newer"
            #expect(try store.renameKey(from: "settings.colour", to: "settings.color"))
            #expect(store[color] == "newer")
            #expect(store[colour] == nil)
            #expect(throws: ChronicleError.self) { try store.renameKey(from: "x", to: "x") }
        }
    }

    @Test func renameReplicatesAndConcurrentRenamesConverge() async throws {
        try await withTemporaryStores(3) { stores in
            let (a, b, c) = (stores[0], stores[1], stores[2])
            let colour = Key<String?>("settings.colour", sync: .manual)
            let color = Key<String?>("settings.color", sync: .manual)
            a[colour] = "teal"
            try await Replicator(store: a, peers: [.store(b), .store(c)]).sync()
            #expect(b[colour] == "teal")
            // a and b both migrate before they hear of each other.
            try a.renameKey(from: colour.name, to: color.name)
            try b.renameKey(from: colour.name, to: color.name)
            for _ in 0..<2 { try await Replicator(store: c, peers: [.store(a), .store(b)]).sync() }
            for store in stores {
                #expect(store[color] == "teal")
                #expect(store[colour] == nil)
                #expect(try !store.renameKey(from: colour.name, to: color.name), "nothing left to rename")
            }
        }
    }

    @Test func renameASecretSealsItUnderItsNewName() throws {
        try withTemporaryStore(configuration: passphraseConfiguration("pass")) { store, _ throws in
            let old = SecretKey<String?>("auth.old")
            let new = SecretKey<String?>("auth.new")
            try store.set("s3cret", for: old)
            #expect(try store.renameKey(from: old.name, to: new.name, in: .secrets))
            #expect(try store.value(for: new) == "s3cret")
            #expect(try store.value(for: old) == nil)
            #expect(try store.verify().isSound)
        }
    }

    @Test func aReRunImportNeverOverwritesWhatTheUserChanged() throws {
        try withDefaultsSuite { defaults in
            defaults.set("light", forKey: "theme")
            defaults.set("old", forKey: "settings.colour")
            try withTemporaryStore { store, _ throws in
                let theme = Key<String>("theme", default: "system")
                func launch() throws {
                    try store.importValues(from: defaults, keys: [theme, Key<String>("settings.colour", default: "")])
                    try store.renameKey(from: "settings.colour", to: "settings.color")
                }
                try launch()
                #expect(store[theme] == "light")
                try store.set("dark", for: theme)
                try store.set("new", for: Key<String>("settings.color", default: ""))
                let events = try store.logEntries().count
                for _ in 0..<3 { try launch() }  // every later launch
                #expect(try store.logEntries().count == events, "a re-run added events")
                #expect(store[theme] == "dark")
                #expect(store[Key<String>("settings.color", default: "")] == "new")
            }
        }
    }

    @Test func importedValuesLoseToChangesMadeAnywhere() async throws {
        let name = "chronicle.tests.\(UUID().uuidString)"
        let defaults = try #require(UserDefaults(suiteName: name))
        defer { defaults.removePersistentDomain(forName: name) }
        defaults.set("light", forKey: "theme")
        defaults.set("old", forKey: "settings.colour")
        let theme = Key<String>("theme", default: "system", sync: .manual)
        let color = Key<String>("settings.color", default: "", sync: .manual)
        let keys: [Keys] = [theme, Key<String>("settings.colour", default: "", sync: .manual)]
        try await withTemporaryStores(2) { stores in
            let (a, b) = (stores[0], stores[1])
            try a.importValues(from: defaults, keys: keys)
            try a.renameKey(from: "settings.colour", to: "settings.color")
            try a.set("dark", for: theme)  // the user, on device A
            try a.set("blue", for: color)
            // Device B's first launch, before it ever synced: its own (same) legacy values.
            try b.importValues(from: defaults, keys: keys)
            try b.renameKey(from: "settings.colour", to: "settings.color")
            #expect(b[theme] == "light")
            try await Replicator(store: a, peers: [.store(b)]).sync()
            for store in [a, b] {
                #expect(store[theme] == "dark")
                #expect(store[color] == "blue")
            }
        }
    }

    @Test func importsTakeTheKeysPolicyAndUnsyncedKeysStayHome() async throws {
        let name = "chronicle.tests.\(UUID().uuidString)"
        let defaults = try #require(UserDefaults(suiteName: name))
        defer { defaults.removePersistentDomain(forName: name) }
        defaults.set(7, forKey: "local.count")
        defaults.set(8, forKey: "by.name")
        try await withTemporaryStores(2) { stores in
            let (a, b) = (stores[0], stores[1])
            let local = Key<Int>("local.count", default: 0)  // no policy: stays on its device
            try a.importValues(from: defaults, keys: [local])
            try a.importValues(from: defaults, names: ["by.name"])
            try a.set(1, for: Key<Int>("declared.plainly", default: 0))
            try KeysByName(a).setValue(fromText: "from the tool", forKeyNamed: "tool.key")
            #expect(try a.logEntries().allSatisfy { $0.policy == .never })
            let report = try await Replicator(store: a, peers: [.store(b)]).sync()
            #expect(report.sent == 0)
            #expect(try b.logEntries().isEmpty)
        }
    }

    @Test func aMigrationStepRunsOncePerStoreAndIsRecorded() throws {
        try withTemporaryStore { store, directory throws in
            var runs = 0
            #expect(try store.migrate("2026-11-first") { _ in runs += 1 })
            #expect(try !store.migrate("2026-11-first") { _ in runs += 1 })
            let reopened = try Store(directory: directory)
            #expect(try !reopened.migrate("2026-11-first") { _ in runs += 1 })
            #expect(runs == 1)
            #expect(try store.migrationDate("2026-11-first") != nil)
            #expect(try store.logEntries().contains { $0.key == "chronicle.migrations.2026-11-first" && $0.policy == .never })
            // A step that throws is not recorded: it runs again.
            struct Interrupted: Error {}
            #expect(throws: Interrupted.self) { try store.migrate("2026-11-second") { _ in throw Interrupted() } }
            #expect(try store.migrate("2026-11-second") { _ in runs += 1 })
            #expect(runs == 2)
            #expect(throws: ChronicleError.self) { try store.migrate("") { _ in } }
        }
    }

    @Test func codableValuesThatDefaultsWroteAsJSONStringsRead() throws {
        try withDefaultsSuite { defaults in
            let profile = Profile(name: "Ada", tags: ["x"], scores: ["a": 1], nested: .init(on: true))
            let json = String(decoding: try JSONEncoder().encode(profile), as: UTF8.self)
            defaults.set(json, forKey: "user.profile")  // sindresorhus/Defaults' layout
            try withTemporaryStore { store, _ throws in
                try store.importValues(from: defaults, keys: [Keys.profile])
                #expect(store[Keys.profile] == profile)
                #expect(try store.value(for: Key<String>("user.profile", default: "")) == json)  // still a string to a String key
            }
        }
    }
}

// MARK: - Renames under writes, hard imports

extension MigrationTests {
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

    #if canImport(Darwin)
    /// Registered defaults (the registration domain: values the app ships, never set by the
    /// user) are imported as if set: they then outrank the Chronicle key's own default forever and
    /// replicate to every device. Foundation exposes the registration domain on Apple platforms
    /// only, so this runs there (never built on Linux; see the test below for Linux).
    @Test func registeredDefaultsAreNotImported() throws {
        try withDefaultsSuite { defaults in
            defaults.register(defaults: ["launches": 5, "theme": "system"])
            defaults.set("dark", forKey: "theme")
            try withTemporaryStore { store, _ throws in
                #expect(try store.importValues(from: defaults, names: ["launches", "theme"]) == 1)
                #expect(!store.hasValue(for: Key<Int>("launches", default: 0, sync: .automaticSmall)), "a registered default is no user value")
            }
        }
    }
    #endif

    /// What Linux can check of registered defaults: swift-corelibs-foundation does not expose the
    /// registration domain, so a registered default cannot be told from a user's value there. The
    /// README's order (import before `register(defaults:)`) is what keeps it out, and it does:
    /// only what the user set is imported.
    @Test func importingBeforeRegisteringDefaultsImportsOnlyWhatTheUserSet() throws {
        try withDefaultsSuite { defaults in
            defaults.set("dark", forKey: "theme")
            try withTemporaryStore { store, _ throws in
                #expect(try store.importValues(from: defaults, names: ["launches", "theme"]) == 1)
                defaults.register(defaults: ["launches": 5, "theme": "system"])
                #expect(!store.hasValue(for: Key<Int>("launches", default: 0, sync: .automaticSmall)), "a registered default is no user value")
                #expect(try store.importValues(from: defaults, names: ["theme"]) == 0, "an import re-run changes nothing")
            }
        }
    }
}
