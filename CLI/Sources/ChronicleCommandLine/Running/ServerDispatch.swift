@_spi(Tools) import Chronicle
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `serve`, `hub` and `sync` with an HTTP peer live in `chronicle-server` (the Tools package, with
/// SwiftNIO, Hummingbird and postgres-nio), so the everyday tool builds in a minute. The everyday
/// tool replaces itself with it, as `git` runs `git-foo`: same arguments, same process id (a
/// service manager keeps tracking it), same standard streams and signals.
enum ServerDispatch {
    /// The executable's name.
    static let name = "chronicle-server"

    /// Whether `arguments` (without the program's name) ask for a command of `chronicle-server`.
    static func needsServer(_ arguments: [String]) -> Bool {
        guard let command = arguments.first else { return false }
        switch command {
        case "serve", "hub": return true
        case "sync": return arguments.dropFirst().contains { $0 == "--peer" || $0.hasPrefix("--peer=") }
        default: return false
        }
    }

    /// `chronicle-server`: `$CHRONICLE_SERVER`, else beside this executable, else on `PATH`.
    static func locate() throws -> String {
        let environment = ProcessInfo.processInfo.environment
        let files = FileManager.default
        if let explicit = environment["CHRONICLE_SERVER"], !explicit.isEmpty {
            guard files.isExecutableFile(atPath: explicit) else {
                throw ChronicleError.invalidArgument("CHRONICLE_SERVER is \(explicit), which is not an executable file")
            }
            return explicit
        }
        var candidates: [String] = []
        if let own = Bundle.main.executableURL?.resolvingSymlinksInPath() {
            candidates.append(own.deletingLastPathComponent().appendingPathComponent(name).path)
        }
        for directory in (environment["PATH"] ?? "").split(separator: ":") where !directory.isEmpty {
            candidates.append(String(directory) + "/" + name)
        }
        guard let found = candidates.first(where: files.isExecutableFile(atPath:)) else {
            throw ChronicleError.invalidArgument(
                "this command runs \(name), which is not installed: build it with "
                    + "`swift build --package-path Tools --product \(name)` and put it beside chronicle or on PATH, "
                    + "or set CHRONICLE_SERVER to its path")
        }
        return found
    }

    /// Replaces this process with `chronicle-server arguments…`; returns only by throwing.
    static func exec(_ arguments: [String]) throws -> Never {
        let path = try locate()
        let argv = ([name] + arguments).map { strdup($0) } + [nil]
        execv(path, argv)
        let reason = String(cString: strerror(errno))
        for pointer in argv { free(pointer) }
        throw ChronicleError.invalidArgument("could not run \(path): \(reason)")
    }
}
