// swift-tools-version:6.1
import PackageDescription

// The operators' and developers' package: `chronicle-server` (the HTTP server, `chronicle serve`;
// HTTP sync; the multi-tenant hub on PostgreSQL), the benchmarks, and the tests of both tools. It
// is nested in the repository so that no app resolves what it needs (SwiftNIO's servers,
// Hummingbird, postgres-nio, swift-prometheus, swift-argument-parser, GRDB): an app adds the root
// package, whose `Chronicle` product brings swift-log alone. The everyday `chronicle` is the CLI
// package, which builds without the network stack. docs/ARCHITECTURE.md says why.
//
//     swift build --package-path Tools            # both tools, the hub and the benchmarks
//     scripts/with-postgres.sh swift test --package-path Tools
let package = Package(
    name: "ChronicleTools",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "chronicle-server", targets: ["chronicle-server"]),
        .executable(name: "chronicle-bench", targets: ["chronicle-bench"]),
        .library(name: "ChronicleHTTPServer", targets: ["ChronicleHTTPServer"]),
        .library(name: "ChronicleHub", targets: ["ChronicleHub"]),
    ],
    dependencies: [
        .package(name: "Chronicle", path: "..", traits: ["HTTPClient", "ServiceLifecycle"]),
        // The everyday tool: its commands and what the two tools share.
        .package(name: "ChronicleCLI", path: "../CLI"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        // The hub: PostgreSQL; metrics through swift-metrics, with the Prometheus backend the tool chooses.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // The benchmark's SQLite peer.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // The raw-LMDB peers and timing the speed gate shares with the benchmark.
        .package(name: "ChronicleBenchmarks", path: "../Benchmarks"),
        // Tests only: child processes (swift-subprocess) and its file paths (swift-system).
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
    ],
    targets: [
        // The HTTP protocol's server: `chronicle serve` on Hummingbird.
        // The HTTP sync protocol (FORMAT.md 8) once, for `chronicle serve` and the hub: routes, query
        // bounds, bearer tokens, body budget. It sees the formats, never a store.
        .target(
            name: "ChronicleSyncProtocol",
            dependencies: [
                .product(name: "ChronicleFormat", package: "Chronicle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        .target(
            name: "ChronicleHTTPServer",
            dependencies: [
                "ChronicleSyncProtocol",
                .product(name: "Chronicle", package: "Chronicle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // The hub: multi-tenant sync on PostgreSQL, speaking the HTTP protocol of the server above.
        .target(
            name: "ChronicleHub",
            dependencies: [
                // A relay: the formats and the protocol, never a store, LMDB or a data key.
                .product(name: "ChronicleFormat", package: "Chronicle"),
                "ChronicleSyncProtocol",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                // Its metric families with help texts (swift-metrics carries none).
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),

        // The server tool: `serve`, HTTP `sync` and `hub`, which the everyday `chronicle` runs.
        .executableTarget(
            name: "chronicle-server",
            dependencies: [
                .product(name: "ChronicleCommandLine", package: "ChronicleCLI"),
                .product(name: "Chronicle", package: "Chronicle"),
                .product(name: "ChronicleHTTP", package: "Chronicle"),
                "ChronicleSyncProtocol",
                "ChronicleHTTPServer",
                "ChronicleHub",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // Benchmarks against raw LMDB, GRDB and UserDefaults.
        .executableTarget(
            name: "chronicle-bench",
            dependencies: [
                .product(name: "Chronicle", package: "Chronicle"),
                .product(name: "ChronicleHTTP", package: "Chronicle"),
                "ChronicleHTTPServer", "ChronicleHub",
                .product(name: "ChronicleBenchSupport", package: "ChronicleBenchmarks"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),

        // What the three test targets share: temporary directories and running the tool.
        .target(
            name: "ToolsTestSupport",
            dependencies: [
                .product(name: "Chronicle", package: "Chronicle"),
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
            ],
            path: "Tests/ToolsTestSupport"
        ),
        .testTarget(
            name: "ChronicleToolTests",
            dependencies: [
                "chronicle-server", "ToolsTestSupport", .product(name: "chronicle", package: "ChronicleCLI"),
                .product(name: "ChronicleFormat", package: "Chronicle"),
                .product(name: "Chronicle", package: "Chronicle"),
                .product(name: "ChronicleTesting", package: "Chronicle"),
            ]
        ),
        .testTarget(
            name: "ChronicleHTTPServerTests",
            dependencies: [
                "ChronicleHTTPServer", "ChronicleSyncProtocol", "chronicle-server", "ToolsTestSupport", .product(name: "chronicle", package: "ChronicleCLI"),
                .product(name: "ChronicleFormat", package: "Chronicle"),
                .product(name: "Chronicle", package: "Chronicle"),
                .product(name: "ChronicleHTTP", package: "Chronicle"),
                .product(name: "ChronicleTesting", package: "Chronicle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "ChronicleHubTests",
            dependencies: [
                "ChronicleHub", "ChronicleSyncProtocol", "ChronicleHTTPServer", "chronicle-server", "ToolsTestSupport", .product(name: "chronicle", package: "ChronicleCLI"),
                .product(name: "ChronicleFormat", package: "Chronicle"),
                .product(name: "Chronicle", package: "Chronicle"),
                .product(name: "ChronicleHTTP", package: "Chronicle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// Strict settings for every target of ours.
for target in package.targets where target.type != .system {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    target.swiftSettings = settings
}
