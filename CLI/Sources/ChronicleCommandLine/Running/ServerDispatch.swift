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
    /// Set in the environment of the process the everyday tool hands a command to: a
    /// `chronicle-server` that is really the everyday tool (a copy or a link) hands it back once,
    /// and is then refused instead of running itself for ever.
    static let handedOver = "CHRONICLE_HANDED_OVER"

    /// Whether `arguments` (without the program's name) ask for a command of `chronicle-server`
    /// (or for its help: `chronicle help serve`).
    static func needsServer(_ arguments: [String]) -> Bool {
        guard let command = arguments.first else { return false }
        switch command {
        case "serve", "hub": return true
        case "help": return arguments.count > 1 && ["serve", "hub"].contains(arguments[1])
        case "sync": return arguments.dropFirst().contains { $0 == "--peer" || $0.hasPrefix("--peer=") }
        default: return false
        }
    }

    /// `chronicle-server`: `$CHRONICLE_SERVER`, else beside this executable, else on `PATH`.
    static func locate() throws -> String {
        let environment = ProcessInfo.processInfo.environment
        if environment[handedOver] != nil {
            throw ChronicleError.invalidArgument(
                "the \(name) that was run handed the command back: it is the everyday chronicle, not the server tool "
                    + "(build it with `swift build --package-path Tools --product \(name)`)")
        }
        if let explicit = environment["CHRONICLE_SERVER"], !explicit.isEmpty {
            guard isExecutableFile(explicit) else {
                throw ChronicleError.invalidArgument("CHRONICLE_SERVER is \(explicit), which is not an executable file")
            }
            return explicit
        }
        var candidates: [String] = []
        if let own = Bundle.main.executableURL?.resolvingSymlinksInPath() {
            candidates.append(own.deletingLastPathComponent().appendingPathComponent(name).path)
        }
        // Absolute entries only: a relative one (`.`, `bin`) would run whatever the current
        // directory holds under that name.
        for directory in (environment["PATH"] ?? "").split(separator: ":") where directory.hasPrefix("/") {
            candidates.append(String(directory) + "/" + name)
        }
        guard let found = candidates.first(where: isExecutableFile) else {
            throw ChronicleError.invalidArgument(
                "this command runs \(name), which is not installed: build it with "
                    + "`swift build --package-path Tools --product \(name)` and put it beside chronicle or on PATH, "
                    + "or set CHRONICLE_SERVER to its path")
        }
        return found
    }

    /// Whether `path` is a regular file this process may execute (a directory of that name is not).
    static func isExecutableFile(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return false }
        return access(path, X_OK) == 0
    }

    /// Replaces this process with `chronicle-server arguments…`; returns only by throwing.
    static func exec(_ arguments: [String]) throws -> Never {
        let path = try locate()
        setenv(handedOver, "1", 1)
        let argv = ([name] + arguments).map { strdup($0) } + [nil]
        execv(path, argv)
        let reason = String(cString: strerror(errno))
        for pointer in argv { free(pointer) }
        throw ChronicleError.invalidArgument("could not run \(path): \(reason)")
    }
}
