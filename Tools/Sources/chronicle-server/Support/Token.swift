import ArgumentParser
import ChronicleCommandLine
@_spi(Tools) import Chronicle
import ChronicleHTTP
import Foundation

/// The bearer-token options of `serve` and `sync`: a token file (0600, your own) or
/// `CHRONICLE_TOKEN`. There is no option for the token itself: the command line is visible to
/// every user of the machine in `ps`.
struct TokenOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Read the bearer token from this file (mode 0600, yours). Or set CHRONICLE_TOKEN.", valueName: "FILE"))
    var tokenFile: String?

    /// The token from the file, else the environment.
    func read() throws -> String {
        if let tokenFile {
            let bytes = try SecretFile.contents(of: URL(fileURLWithPath: tokenFile), what: "token file")
            let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !text.isEmpty else { throw ValidationError("the token file \(tokenFile) is empty") }
            return text
        }
        if let token = ProcessInfo.processInfo.environment["CHRONICLE_TOKEN"], !token.isEmpty { return token }
        throw ValidationError("give the bearer token: --token-file FILE or CHRONICLE_TOKEN")
    }
}
