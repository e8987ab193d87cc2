import ArgumentParser
import Chronicle
import ChronicleHTTP
import Foundation

extension ChronicleCommand {
    struct Serve: AsyncParsableCommand {
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
        @Option(help: ArgumentHelp("PEM certificate chain for HTTPS.", valueName: "FILE")) var tlsCert: String?
        @Option(help: ArgumentHelp("PEM private key for HTTPS.", valueName: "FILE")) var tlsKey: String?

        @Flag(help: "Serve plain HTTP on an address other machines reach (the token and every value cross the network in the clear).")
        var insecure = false
        @Option(help: "The most connections one client address may hold (0: no limit, behind a proxy).")
        var maxConnectionsPerAddress = 32

        func validate() throws {
            if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("HTTPS needs both --tls-cert and --tls-key") }
            let loopback = HTTPTransport.isLoopback(host: host)
            if tlsCert == nil, !loopback, !insecure {
                throw ValidationError("plain HTTP on \(host) sends the token and every value in the clear: give --tls-cert and --tls-key, or --insecure")
            }
            if !(0...65535).contains(port) { throw ValidationError("--port must be 0...65535") }
            if maxConnectionsPerAddress < 0 { throw ValidationError("--max-connections-per-address cannot be negative") }
        }

        func run() async throws {
            let secret = try tokenOptions.read()
            let store = try options.open()
            var server = ChronicleServer(store: store, token: secret)
            server.maxConnectionsPerAddress = maxConnectionsPerAddress
            let tls = tlsCert.flatMap { cert in tlsKey.map { ChronicleServer.TLS(certificateChain: URL(fileURLWithPath: cert), privateKey: URL(fileURLWithPath: $0)) } }
            let scheme = tls == nil ? "http" : "https"
            let host = self.host
            try await server.run(host: host, port: port, tls: tls, gracefulShutdownSignals: true) { bound in
                // Written unbuffered, so a supervising process sees the port at once.
                FileHandle.standardOutput.write(Data("serving \(store.directory.path) on \(scheme)://\(host):\(bound)\n".utf8))
            }
        }
    }
}
