import ArgumentParser
@_spi(Tools) import Chronicle
import Foundation

enum DemoTheme: String, Codable, Sendable {
    case system, light, dark
}

struct DemoWindow: Codable, Sendable, Equatable {
    var width: Int
    var height: Int
}

extension Keys {
    static let demoTheme = Key<DemoTheme>("demo.theme", default: .system, sync: .automaticSmall)
    static let demoLaunches = Key<Int>("demo.launches", default: 0, sync: .never)
    static let demoWindow = Key<DemoWindow?>("demo.window", sync: .manual)
    static let demoToken = SecretKey<String?>("demo.token", sync: .manual)
}

extension EverydayCommands {
    struct Demo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A short tour on the embedded default store (or --store DIR).",
            discussion: """
                Writes settings and a secret, shows their history, replicates to a second store, replays the \
                log to a point in time, verifies, and says what it did. Run it twice: the store remembers. \
                The secret is sealed with the default key file (created 0600 under $XDG_CONFIG_HOME/chronicle/) \
                unless --passphrase-file or --key-file is given.
                """)

        @OptionGroup var options: StoreOptions

        func run() async throws {
            let store = try options.open()
            print("store     \(store.directory.path)  (replica \(try store.replicaID.short))")

            // 1. Settings and a secret, in one transaction.
            let launches = store[.demoLaunches] + 1
            let token = "token-\(UUID().uuidString.prefix(8))"
            let before = try store.statistics().head  // the log as it was before this run's batch
            try store.write { batch in
                batch[.demoLaunches] = launches
                batch[.demoTheme] = launches.isMultiple(of: 2) ? .light : .dark
                batch[.demoWindow] = DemoWindow(width: 800 + launches, height: 600)
                batch[.demoToken] = token
            }
            let window = store[.demoWindow].map { "\($0.width)x\($0.height)" } ?? "none"
            print("write     launch #\(launches): theme \(store[.demoTheme]), window \(window), token sealed (\(store[.demoToken] == token ? "reads back" : "UNREADABLE"))")

            // 2. History of a key.
            let history = try store.history(of: .demoTheme)
            let recent = history.suffix(3).map { "\($0.value?.rawValue ?? "removed")@#\($0.sequence)" }.joined(separator: ", ")
            print("history   demo.theme has \(history.count) revision(s); latest: \(recent)")

            // 3. Replicate to a second store, both ways.
            let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-demo-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: scratch) }
            let laptop = try Store(directory: scratch.appendingPathComponent("laptop"), configuration: try options.configuration())
            laptop[.demoTheme] = .light
            let report = try await Replicator(store: store, peers: [.store(laptop)]).sync()
            print("sync      sent \(report.sent), received \(report.received); laptop sees theme \(laptop[.demoTheme]), window \(laptop[.demoWindow] != nil ? "yes" : "no"), launches \(laptop[.demoLaunches]) (never synced)")

            // 4. A point-in-time copy: the log as it was before this run's batch.
            let past = try store.copy(to: scratch.appendingPathComponent("past"), through: .sequence(before))
            print("replay    copy through sequence \(before): launches \(past[.demoLaunches]) then, \(store[.demoLaunches]) now")

            // 5. Verify the hash chain and that the views equal a replay.
            let verification = try store.verify()
            print("verify    \(verification)")
            if !verification.isSound { throw ExitCode(1) }
            print("done      `chronicle log --store \(store.directory.path)` shows every event")
        }
    }
}
