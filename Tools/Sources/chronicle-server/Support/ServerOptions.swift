import ArgumentParser
import ChronicleCommandLine
import ChronicleHTTP
import ChronicleHTTPServer
import ChronicleSyncProtocol
import Foundation

/// What `serve` and `hub serve` share: HTTPS or a stated reason for plain HTTP, and the
/// per-address connection limit.
struct ServerOptions: ParsableArguments {
    @Option(help: ArgumentHelp("PEM certificate chain for HTTPS.", valueName: "FILE")) var tlsCert: String?
    @Option(help: ArgumentHelp("PEM private key for HTTPS.", valueName: "FILE")) var tlsKey: String?
    @Flag(
        inversion: .prefixedNo,
        help: "Serve plain HTTP on an address other machines reach (tokens and values cross the network in the clear unless a proxy terminates TLS); --no-insecure overrides a hub configuration file.")
    var insecure: Bool?
    @Option(help: "The most connections one client address may hold (0: no limit, behind a proxy; default 32 for serve, 64 for a hub node).")
    var maxConnectionsPerAddress: Int?

    /// These options over `file`'s (`hub serve --config`).
    /// The certificate and key come as a pair from one place: either on the command line wins
    /// over both of the file's (a half pair is then refused), never one from each.
    func settings(over file: HubConfigFile? = nil) -> ServerSettings {
        let fromCommandLine = tlsCert != nil || tlsKey != nil
        return ServerSettings(
            tlsCert: fromCommandLine ? tlsCert : file?.tlsCert, tlsKey: fromCommandLine ? tlsKey : file?.tlsKey,
            insecure: insecure ?? file?.insecure ?? false,
            maxConnectionsPerAddress: maxConnectionsPerAddress ?? file?.maxConnectionsPerAddress)
    }
}

/// The server settings in force: the command line's over a configuration file's.
struct ServerSettings {
    var tlsCert: String?
    var tlsKey: String?
    var insecure: Bool
    var maxConnectionsPerAddress: Int?

    /// Refuses plain HTTP off loopback unless `--insecure`, half a TLS setting, a negative limit.
    func validate(host: String) throws {
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("HTTPS needs both --tls-cert and --tls-key") }
        if tlsCert == nil, !HTTPTransport.isLoopback(host: host), !insecure {
            throw ValidationError(
                "plain HTTP on \(host) sends every token and value in the clear: give --tls-cert and --tls-key, or --insecure behind a proxy that terminates TLS")
        }
        if (maxConnectionsPerAddress ?? 0) < 0 { throw ValidationError("--max-connections-per-address cannot be negative") }
    }

    /// The HTTPS setting, when certificate and key are given.
    var tls: ChronicleServer.TLS? {
        guard let tlsCert, let tlsKey else { return nil }
        return ChronicleServer.TLS(certificateChain: URL(fileURLWithPath: tlsCert), privateKey: URL(fileURLWithPath: tlsKey))
    }
}
