import ArgumentParser
import ChronicleCommandLine
@_spi(Tools) import Chronicle
import ChronicleHTTP
import ChronicleHTTPServer
import Foundation
import Logging

extension ChronicleCommand {
    struct Serve: AsyncParsableCommand, LoggingCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve this store to replicas over HTTP(S).",
            discussion: """
                Every request needs `Authorization: Bearer TOKEN`. SIGINT or SIGTERM stops the server after \
                in-flight batches finish. With --tls-cert and --tls-key (PEM files) it serves HTTPS.

                The store keeps every revision it relays unless --retain-revisions says otherwise: a relay \
                without the group's key counts revisions by arrival, so anyone with the token could push \
                a member's value out of a bounded history with junk. Bound it when the store is opened with \
                the group's key (it then verifies what it keeps).

                Examples:
                  chronicle serve --store ./store --port 7070 --token-file token
                  chronicle serve --store ./store --port 7443 --token-file token \\
                    --tls-cert cert.pem --tls-key key.pem
                """)

        @OptionGroup var options: StoreOptions
        @Option(help: "The address to bind.") var host = "127.0.0.1"
        @Option(help: "The port (0 picks a free one).") var port = 7070
        @OptionGroup var tokenOptions: TokenOptions
        @OptionGroup var serverOptions: ServerOptions
        @OptionGroup var log: LogOptions
        @Option(help: "Revisions of a key the store keeps (default: every revision).") var retainRevisions: Int?

        func validate() throws {
            try serverOptions.settings().validate(host: host)
            if !(0...65535).contains(port) { throw ValidationError("--port must be 0...65535") }
            if let retainRevisions, retainRevisions < 1 { throw ValidationError("--retain-revisions is at least 1") }
        }

        func run() async throws {
            let secret = try tokenOptions.read()
            var configuration = try options.configuration()
            configuration.retention = retainRevisions.map { .revisions($0) } ?? .forever
            let store = try Store(directory: options.directory, configuration: configuration)
            var server = ChronicleServer(store: store, token: secret, logger: Logger(label: "chronicle.serve"))
            let settings = serverOptions.settings()
            if let limit = settings.maxConnectionsPerAddress { server.maxConnectionsPerAddress = limit }
            let tls = settings.tls
            let scheme = tls == nil ? "http" : "https"
            let host = self.host
            try await server.run(host: host, port: port, tls: tls, gracefulShutdownSignals: true) { bound in
                // Written unbuffered, so a supervising process sees the port at once.
                FileHandle.standardOutput.write(Data("serving \(store.directory.path) on \(scheme)://\(host):\(bound)\n".utf8))
            }
        }
    }
}
