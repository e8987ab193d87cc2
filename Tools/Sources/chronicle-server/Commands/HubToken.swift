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
    struct Token: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Issue and revoke device tokens.", subcommands: [Issue.self, Revoke.self])

        struct Issue: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Issue a device's token: shown once, stored only as its hash.",
                discussion: """
                    Issuing again replaces the device's previous token. With --output the token goes to a new \
                    file of mode 0600 (what `chronicle sync --token-file` accepts), else to standard output.
                    """)
            @OptionGroup var database: DatabaseOptions
            @Option(help: "The tenant.") var tenant: String
            @Option(help: "The device's name.") var device: String
            @Option(help: ArgumentHelp("Write the token to this new file, mode 0600 (an existing file is refused).", valueName: "FILE"))
            var output: String?

            func run() async throws {
                let (tenant, device) = (tenant, device)
                guard let output else {
                    print(try await database.with { try await $0.issueToken(tenant: tenant, device: device) })
                    return
                }
                // The file first: a token issued into a file that cannot be made would be lost.
                let descriptor = open(output, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
                guard descriptor >= 0 else {
                    throw ChronicleError.io(path: output, reason: "cannot create it (\(String(cString: strerror(errno)))); the token was not issued")
                }
                let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
                do {
                    let token = try await database.with { try await $0.issueToken(tenant: tenant, device: device) }
                    try handle.write(contentsOf: Data((token + "\n").utf8))
                    try handle.synchronize()
                } catch {
                    try? FileManager.default.removeItem(atPath: output)
                    throw error
                }
                print("issued the token of \(terminalSafe(device)) into \(terminalSafe(output)) (mode 0600)")
            }
        }

        struct Revoke: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Revoke a device's token: refused at once on every node.")
            @OptionGroup var database: DatabaseOptions
            @Option(help: "The tenant.") var tenant: String
            @Option(help: "The device's name.") var device: String

            func run() async throws {
                let (tenant, device) = (tenant, device)
                guard try await database.with({ try await $0.revokeToken(tenant: tenant, device: device) }) else {
                    throw ValidationError("\(terminalSafe(device)) of \(terminalSafe(tenant)) has no token")
                }
                print("revoked")
            }
        }
    }
}
