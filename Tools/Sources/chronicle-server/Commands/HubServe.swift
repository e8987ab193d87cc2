import ArgumentParser
import ChronicleCommandLine
@_spi(Tools) import Chronicle
import ChronicleHTTP
import ChronicleHTTPServer
import ChronicleHub
import Foundation
import Logging
import Metrics
import Prometheus

extension ChronicleCommand.Hub {
    struct Serve: AsyncParsableCommand, LoggingCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve every tenant over HTTP (stateless: run several behind a load balancer).",
            discussion: """
                SIGINT/SIGTERM stop it gracefully. /healthz and /metrics need no token, so they are served \
                on an address of their own (--metrics-host, --metrics-port), loopback by default, never \
                on the public port.

                A configuration file (--config) holds any of the options below as JSON, in snake case. \
                Relative paths in it are relative to the file; "metrics": false is --no-metrics. For example:
                  {"database_file": "database", "host": "0.0.0.0", "max_connections": 10000}
                """)
        @OptionGroup var database: DatabaseOptions
        @Option(help: ArgumentHelp(
            "Read settings from this JSON file: the long options below in snake case, for example {\"port\": 8787, \"max_connections\": 10000}. Options on the command line win, then the environment, then the file.",
            valueName: "FILE"))
        var config: String?
        @Option(help: "The address to bind (default 127.0.0.1).") var host: String?
        @Option(help: "The port (0: any free one; default 8787).") var port: Int?
        @Option(help: "The address of /healthz and /metrics (keep it off the public interface; default 127.0.0.1).") var metricsHost: String?
        @Option(help: "The port of /healthz and /metrics (0: any free one; default 9464).") var metricsPort: Int?
        @Flag(inversion: .prefixedNo, help: "Serve /healthz and /metrics (the default), or not at all.") var metrics: Bool?
        @Option(help: "The most connections the node serves at once; each long-polling device holds one (default 1024).") var maxConnections: Int?
        @Option(help: "The longest a long-poll is held, in seconds (default 30).") var maxWaitSeconds: Int?
        @Option(help: "The largest push body accepted, in bytes (default 16 MiB).") var maxBodyBytes: Int?
        @Option(help: "The most connections the node opens to PostgreSQL (default 40); every node's together must fit the server's max_connections.")
        var databaseConnections: Int?
        @OptionGroup var server: ServerOptions
        @OptionGroup var log: LogOptions

        /// What is in force: the command line's options over the configuration file's over the defaults.
        struct Settings {
            var file: HubConfigFile?
            var host: String
            var port: Int
            var metricsHost: String
            var metricsPort: Int
            var metrics: Bool
            var maxConnections: Int
            var maxWait: Int
            var maxBodyBytes: Int
            var databaseConnections: Int
            var server: ServerSettings
        }

        func settings() throws -> Settings {
            let file = try config.map(HubConfigFile.load)
            let settings = Settings(
                file: file, host: host ?? file?.host ?? "127.0.0.1", port: port ?? file?.port ?? 8787,
                metricsHost: metricsHost ?? file?.metricsHost ?? "127.0.0.1", metricsPort: metricsPort ?? file?.metricsPort ?? 9464,
                metrics: metrics ?? file?.metrics ?? true, maxConnections: maxConnections ?? file?.maxConnections ?? 1_024,
                maxWait: maxWaitSeconds ?? file?.maxWaitSeconds ?? 30, maxBodyBytes: maxBodyBytes ?? file?.maxBodyBytes ?? 16 << 20,
                databaseConnections: databaseConnections ?? file?.databaseConnections ?? HubDatabase.defaultPoolSize,
                server: server.settings(over: file))
            try settings.server.validate(host: settings.host)
            // Named as an option and as a setting of the file: either may have given it.
            func option(_ name: String) -> String {
                config.map { "--\(name) (\"\(name.replacingOccurrences(of: "-", with: "_"))\" in \($0))" } ?? "--\(name)"
            }
            for (name, port) in [("port", settings.port), ("metrics-port", settings.metricsPort)] where !(0...65535).contains(port) {
                throw ValidationError("\(option(name)) must be 0...65535")
            }
            if settings.maxConnections < 1 { throw ValidationError("\(option("max-connections")) is at least 1") }
            if !(1...300).contains(settings.maxWait) { throw ValidationError("\(option("max-wait-seconds")) is 1...300") }
            if settings.maxBodyBytes < 1 << 16 { throw ValidationError("\(option("max-body-bytes")) is at least 65536") }
            if !(1...10_000).contains(settings.databaseConnections) { throw ValidationError("\(option("database-connections")) is 1...10000") }
            if let database = file?.database, URLComponents(string: database)?.password != nil {
                throw ValidationError("\(config ?? ""): \"database\" holds a password; put the URL in a 0600 file named by \"database_file\"")
            }
            if let level = file?.logLevel, Logger.Level(rawValue: level) == nil {
                throw ValidationError("\(config ?? ""): \"log_level\" is trace, debug, info, notice, warning, error or critical")
            }
            if let format = file?.logFormat, !["text", "json"].contains(format) {
                throw ValidationError("\(config ?? ""): \"log_format\" is text or json")
            }
            return settings
        }

        func validate() throws {
            _ = try settings()
        }

        /// The configuration file's log settings, under the command line's and the environment's.
        var logDefaults: (level: String?, format: String?) {
            let file = config.flatMap { try? HubConfigFile.load($0) }
            return (file?.logLevel, file?.logFormat)
        }

        func run() async throws {
            let settings = try settings()
            let hubDatabase = try database.open(over: settings.file, poolSize: settings.databaseConnections)
            // Never serve a schema this build does not match: one it would fail on, or a newer one it
            // cannot run beside.
            // (`with` checks the connection first: a database it cannot use is reported at once.)
            try await database.with(over: settings.file) { try await $0.checkSchema() }
            // The metrics backend, chosen here: Prometheus, served on the operator's address. The
            // node registers its families on the registry with their help texts; what libraries
            // record through swift-metrics lands in the same registry.
            let registry = PrometheusCollectorRegistry()
            MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
            var node = HubNode(database: hubDatabase, logger: Logger(label: "chronicle.hub"), registry: registry)
            node.metricsText = { registry.emitToBuffer() }
            if let limit = settings.server.maxConnectionsPerAddress { node.maxConnectionsPerAddress = limit }
            node.maxConnections = settings.maxConnections
            node.maxWait = .seconds(settings.maxWait)
            node.idleTimeout = .seconds(max(75, settings.maxWait + 45))
            node.maxBodySize = settings.maxBodyBytes
            if settings.metrics { node.operatorEndpoint = .init(host: settings.metricsHost, port: settings.metricsPort) }
            let (host, metricsHost) = (settings.host, settings.metricsHost)
            try await node.run(
                host: host, port: settings.port, tls: settings.server.tls, gracefulShutdownSignals: true,
                onRunning: { bound in
                    // Written at once, not buffered: a supervisor reading a pipe sees it now.
                    FileHandle.standardOutput.write(Data("hub serving on \(host):\(bound)\n".utf8))
                },
                onOperatorRunning: { bound in
                    FileHandle.standardOutput.write(Data("hub metrics and health on \(metricsHost):\(bound)\n".utf8))
                })
        }
    }
}
