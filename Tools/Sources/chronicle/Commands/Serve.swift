import ArgumentParser
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
                Every request needs `Authorization: Bearer TOKEN`. SIGINT or SIGTERM stops the server after
                in-flight batches finish. With --tls-cert and --tls-key (PEM files) it serves HTTPS.

                Examples:
                  chronicle serve --store ./store --host 127.0.0.1 --port 7070 --token-file ~/.config/chronicle/token
                  chronicle serve --store ./store --port 7443 --token-file token.txt --tls-cert cert.pem --tls-key key.pem
                """)

        @OptionGroup var options: StoreOptions
        @Option(help: "The address to bind.") var host = "127.0.0.1"
        @Option(help: "The port (0 picks a free one).") var port = 7070
        @OptionGroup var tokenOptions: TokenOptions
        @OptionGroup var serverOptions: ServerOptions
        @OptionGroup var log: LogOptions

        func validate() throws {
            try serverOptions.settings().validate(host: host)
            if !(0...65535).contains(port) { throw ValidationError("--port must be 0...65535") }
        }

        func run() async throws {
            let secret = try tokenOptions.read()
            let store = try options.open()
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
