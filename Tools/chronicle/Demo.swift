import ArgumentParser
import Chronicle
import Foundation

enum DemoTheme: String, Codable, Sendable {
    case system, light, dark
}

struct DemoWindow: Codable, Sendable, Equatable {
    var width: Int
    var height: Int
}

extension Keys {
    static let demoTheme = Key<DemoTheme>("demo.theme", default: .system)
    static let demoLaunches = Key<Int>("demo.launches", default: 0, sync: .never)
    static let demoWindow = Key<DemoWindow?>("demo.window", sync: .manual)
}

struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A short tour on the embedded default store (or --store DIR).")

    @OptionGroup var options: StoreOptions

    func run() throws {
        let store = try options.open()
        print("store: \(store.directory.path)  (replica \(try store.replicaID.short))")

        let launches = store[.demoLaunches] + 1
        try store.write { batch in
            batch[.demoLaunches] = launches
            batch[.demoTheme] = launches.isMultiple(of: 2) ? .light : .dark
            batch[.demoWindow] = DemoWindow(width: 800 + launches, height: 600)
        }
        print("launch #\(launches): theme = \(store[.demoTheme]), window = \(store[.demoWindow].map { "\($0.width)x\($0.height)" } ?? "none")")

        let history = try store.history(of: .demoTheme)
        print("theme history (\(history.count) revisions, newest last):")
        for revision in history.suffix(3) {
            print("  #\(revision.sequence)  \(revision.value.map { $0.rawValue } ?? "(removed)")  at \(revision.date)  by \(revision.origin.short)")
        }

        try store.rebuildViews()
        let report = try store.verify()
        print("replayed the log into fresh views; verify: \(report)")
    }
}
