import ArgumentParser
import ChronicleCommandLine
@_spi(Tools) import Chronicle
import ChronicleHTTP
import Foundation

extension ChronicleCommand {
    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Push and pull every syncable event with a `chronicle serve` peer.",
            discussion: """
                Resumes from per-peer checkpoints; an interrupted sync loses nothing and the next one continues.

                Example:
                  chronicle sync --store ./store --peer https://sync.example.com:7443 --token-file token
                """)

        @OptionGroup var options: StoreOptions
        @Option(help: ArgumentHelp("The peer's base URL.", valueName: "URL")) var peer: String
        @OptionGroup var tokenOptions: TokenOptions
        @Option(help: ArgumentHelp("Trust these PEM certificate authorities (a self-signed server).", valueName: "FILE")) var ca: String?
        @Flag(help: "Allow http:// to another machine (the token and every value cross the network in the clear).") var insecure = false
        @Flag(help: "One JSON object with the counts.") var json = false

        func validate() throws {
            guard let url = URL(string: peer), ["http", "https"].contains(url.scheme ?? "") else {
                throw ValidationError("--peer must be an http:// or https:// URL")
            }
        }

        func run() async throws {
            let secret = try tokenOptions.read()
            guard let url = URL(string: peer) else { throw ValidationError("bad --peer URL") }
            let store = try options.open()
            var configuration = Replicator.Configuration()
            let progress = ProgressLine(label: "sync")
            configuration.progress = { _, events in progress.count(events) }
            let replicator = Replicator(
                store: store, peers: [.http(url, token: secret, trustedCertificates: ca.map { URL(fileURLWithPath: $0) }, allowingInsecureHTTP: insecure)], configuration: configuration)
            let report = try await replicator.sync()
            progress.finish()
            printSyncReport(report, json: json)
        }
    }
}
