// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Chronicle",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "Chronicle", targets: ["Chronicle"]),
        .library(name: "ChronicleTesting", targets: ["ChronicleTesting"]),
        .library(name: "ChronicleHTTP", targets: ["ChronicleHTTP"]),
        .library(name: "ChronicleHub", targets: ["ChronicleHub"]),
        .executable(name: "chronicle", targets: ["chronicle"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-async-algorithms", from: "1.1.4"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // Tests only: child processes (swift-subprocess) and its file paths (swift-system).
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // The hub: PostgreSQL and Prometheus metrics.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // Benchmarks only (the chronicle-bench target is in no product).
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // System libraries: the only modules that see C declarations, through the wrappers below.
        // Every target name carries the project's prefix: a bare `LMDB`, `CLMDB` or `Sodium` is also a
        // target of other packages (QuickLMDB, swift-sodium), and SwiftPM refuses two targets of one
        // name in an app's build graph.
        .systemLibrary(name: "CChronicleLMDB", pkgConfig: "lmdb", providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]),
        .systemLibrary(name: "CChronicleSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"]), .brew(["libsodium"])]),
        // prctl for the tool (a header only: nothing to link).
        .systemLibrary(name: "CChronicleSystem"),

        // Safe Swift wrappers.
        .target(name: "ChronicleLMDB", dependencies: ["CChronicleLMDB"]),
        .target(name: "ChronicleSodium", dependencies: ["CChronicleSodium"]),

        // The domain.
        .target(
            name: "Chronicle",
            dependencies: [
                "ChronicleLMDB",
                "ChronicleSodium",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncAlgorithms", package: "swift-async-algorithms"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),

        // Test support for apps and transports: a transport conformance suite and fault injection.
        .target(name: "ChronicleTesting", dependencies: ["Chronicle"]),

        // HTTP replication: a Hummingbird server and an async-http-client transport.
        .target(
            name: "ChronicleHTTP",
            dependencies: [
                "Chronicle",
                "ChronicleSodium",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // The hub: multi-tenant sync on PostgreSQL, speaking the HTTP protocol of ChronicleHTTP's server.
        .target(
            name: "ChronicleHub",
            dependencies: [
                "Chronicle",
                "ChronicleSodium",
                "ChronicleHTTP",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // The command-line tool.
        .executableTarget(
            name: "chronicle",
            dependencies: [
                "Chronicle",
                "ChronicleHTTP",
                "ChronicleHub",
                "CChronicleSystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tools/chronicle"
        ),

        // Benchmarks against raw LMDB, GRDB and UserDefaults (not part of any product).
        // The benchmark alone imports the C module: its raw-LMDB peer must call `mdb_put`/`mdb_get`
        // directly, without our wrapper, so the table shows what the wrapper and the domain cost.
        .executableTarget(
            name: "chronicle-bench",
            dependencies: [
                "Chronicle", "ChronicleHTTP", "ChronicleHub", "CChronicleLMDB",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Tools/chronicle-bench"
        ),

        // A child process for the crash-safety tests (not part of any product).
        .executableTarget(name: "chronicle-stress", dependencies: ["Chronicle"], path: "Tools/chronicle-stress"),

        .testTarget(name: "ChronicleLMDBTests", dependencies: ["ChronicleLMDB"]),
        .testTarget(name: "ChronicleSodiumTests", dependencies: ["ChronicleSodium"]),
        .testTarget(
            name: "ChronicleTests",
            dependencies: [
                "Chronicle", "ChronicleTesting", "ChronicleLMDB", "ChronicleSodium", "chronicle", "chronicle-stress",
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "ChronicleHTTPTests",
            dependencies: [
                "ChronicleHTTP", "Chronicle", "ChronicleTesting", "chronicle",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "ChronicleHubTests",
            dependencies: [
                "ChronicleHub", "ChronicleHTTP", "Chronicle", "ChronicleSodium", "chronicle",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
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
