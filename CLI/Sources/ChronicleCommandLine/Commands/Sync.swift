import ArgumentParser
@_spi(Tools) public import Chronicle
import Foundation

extension EverydayCommands {
    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Push and pull every syncable event with another store, a shared folder or a server.",
            discussion: """
                Resumes from per-peer checkpoints; an interrupted sync loses nothing and the next one continues. \
                --peer-store must be an existing store, and is opened with this store's key options (a sealed \
                peer needs the same passphrase or key file). With --peer URL (a `chronicle serve` \
                or a hub) the command runs `chronicle-server sync`, which takes --token-file, --ca and \
                --insecure too (`chronicle-server sync --help`).

                Examples:
                  chronicle sync --store ./laptop --folder ~/Dropbox/chronicle
                  chronicle sync --store ./laptop --peer-store ./backup
                  chronicle sync --store ./store --peer https://sync.example.com:7443 --token-file token
                """)

        @OptionGroup var options: StoreOptions
        @Option(help: ArgumentHelp("A shared folder that members sync through (created if missing).", valueName: "DIR"))
        var folder: String?
        @Option(help: ArgumentHelp("Another store on this machine.", valueName: "DIR")) var peerStore: String?
        @Option(help: ArgumentHelp("A server's base URL (runs chronicle-server sync).", valueName: "URL")) var peer: String?
        @Flag(help: "One JSON object with the counts.") var json = false

        func validate() throws {
            let given = [folder, peerStore, peer].compactMap { $0 }
            guard given.count == 1 else { throw ValidationError("give one peer: --folder DIR, --peer-store DIR or --peer URL") }
            if let peerStore, URL(fileURLWithPath: peerStore).resolvingSymlinksInPath().path == options.directory.resolvingSymlinksInPath().path {
                throw ValidationError("--peer-store is this store")
            }
        }

        func run() async throws {
            // --peer never reaches here: the everyday tool hands it to chronicle-server first.
            guard peer == nil else { throw ValidationError("--peer URL needs chronicle-server") }
            let store = try options.open()
            let other: Peer
            if let peerStore {
                var peerOptions = options
                peerOptions.store = peerStore
                peerOptions.app = nil
                other = .store(try peerOptions.openExisting())  // a typo must not create a store and fill it
            } else {
                other = .directory(URL(fileURLWithPath: folder ?? "", isDirectory: true))
            }
            var configuration = Replicator.Configuration()
            let progress = ProgressLine(label: "sync")
            configuration.progress = { _, events in progress.count(events) }
            let report = try await Replicator(store: store, peers: [other], configuration: configuration).sync()
            progress.finish()
            printSyncReport(report, json: json)
        }
    }
}

/// The counts of a sync, as a line or one JSON object (both tools' `sync` print them so).
public func printSyncReport(_ report: SyncReport, json: Bool) {
    if json {
        printJSONLine([
            "sent": report.sent, "received": report.received, "applied": report.applied, "duplicates": report.duplicates,
            "deferred": report.deferred, "quarantined": report.quarantined, "refusedByPeer": report.refusedByPeers,
        ])
        return
    }
    print(
        "sent \(report.sent), received \(report.received), applied \(report.applied), duplicates \(report.duplicates), "
            + "deferred \(report.deferred), quarantined \(report.quarantined), refused by the peer \(report.refusedByPeers)")
}
