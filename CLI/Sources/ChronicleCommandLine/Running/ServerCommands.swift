public import ArgumentParser

/// The everyday tool's entries for the commands `chronicle-server` runs: they give the root
/// help its lines. `ToolMain` hands their command lines to `chronicle-server` before parsing.
public enum ServerCommand {
    /// `chronicle serve …`, run by `chronicle-server serve …`.
    public struct Serve: ParsableCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Serve this store to replicas over HTTP(S) (runs chronicle-server serve).")
        @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
        public init() {}
        public func run() throws { try ServerDispatch.exec(["serve"] + arguments) }
    }

    /// `chronicle hub …`, run by `chronicle-server hub …`.
    public struct Hub: ParsableCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Run and administer the multi-tenant hub on PostgreSQL (runs chronicle-server hub).")
        @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
        public init() {}
        public func run() throws { try ServerDispatch.exec(["hub"] + arguments) }
    }
}
