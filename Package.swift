// swift-tools-version:6.1
import PackageDescription

// What an app adds. An app that depends on the `Chronicle` product resolves swift-log and nothing
// else; the HTTP client and swift-service-lifecycle come only with the traits that ask for them:
//
//     .package(url: "https://…/chronicle", from: "0.4.0", traits: ["HTTPClient"])
//
// The `chronicle` tool, its HTTP server, the hub and the benchmarks live in the nested package
// Tools/ (Tools/Package.swift), which no app resolves. docs/ARCHITECTURE.md says why.
let package = Package(
    name: "Chronicle",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "Chronicle", targets: ["Chronicle"]),
        .library(name: "ChronicleTesting", targets: ["ChronicleTesting"]),
        // Replication over HTTP(S) with a `chronicle serve` or a hub: needs the HTTPClient trait.
        .library(name: "ChronicleHTTP", targets: ["ChronicleHTTP"]),
        // The wire and disk formats (FORMAT.md) as values, with no storage: what a relay (the hub)
        // needs to read and check ranges. `Chronicle` re-exports it.
        .library(name: "ChronicleFormat", targets: ["ChronicleFormat"]),
    ],
    traits: [
        .trait(
            name: "HTTPClient",
            description: "The ChronicleHTTP product: Peer.http over async-http-client and SwiftNIO."),
        .trait(
            name: "ServiceLifecycle",
            description: "Replicator conforms to swift-service-lifecycle's Service."),
        .default(enabledTraits: []),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // Tests only: child processes (swift-subprocess) and its file paths (swift-system).
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
    ],
    targets: [
        // System libraries: the only modules that see C declarations, through the wrappers below.
        // Every target name carries the project's prefix: a bare `LMDB`, `CLMDB` or `Sodium` is also a
        // target of other packages (QuickLMDB, swift-sodium), and SwiftPM refuses two targets of one
        // name in an app's build graph.
        .systemLibrary(name: "CChronicleLMDB", pkgConfig: "lmdb", providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]),
        .systemLibrary(name: "CChronicleSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"]), .brew(["libsodium"])]),

        // Safe Swift wrappers, in no product: only this package sees them.
        .target(name: "ChronicleLMDB", dependencies: ["CChronicleLMDB"]),
        .target(name: "ChronicleSodium", dependencies: ["CChronicleSodium"]),

        // The formats: records, heads, events, ranges, keys and their bounds; no LMDB.
        .target(name: "ChronicleFormat", dependencies: ["ChronicleSodium"]),

        // The log: the only module that touches LMDB. It cannot see the facade above it (Store,
        // keys, the keyring, the replicator): the store hands it LogOptions and prepared changes.
        .target(
            name: "ChronicleLog",
            dependencies: [
                "ChronicleFormat", "ChronicleLMDB", "ChronicleSodium",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // The domain.
        .target(
            name: "Chronicle",
            dependencies: [
                "ChronicleFormat",
                "ChronicleLog",
                "ChronicleSodium",
                .product(name: "Logging", package: "swift-log"),
                .product(
                    name: "ServiceLifecycle", package: "swift-service-lifecycle",
                    condition: .when(traits: ["ServiceLifecycle"])),
            ]
        ),

        // Test support for apps and transports: a transport conformance suite and fault injection.
        .target(name: "ChronicleTesting", dependencies: ["Chronicle"]),

        // The HTTP client (Peer.http); BearerToken, the token rules the server and the hub share, is
        // in ChronicleFormat and re-exported here.
        .target(
            name: "ChronicleHTTP",
            dependencies: [
                "Chronicle",
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["HTTPClient"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["HTTPClient"])),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(traits: ["HTTPClient"])),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(traits: ["HTTPClient"])),
            ]
        ),

        // A child process for the crash-safety and cross-process tests (in no product).
        .executableTarget(name: "chronicle-stress", dependencies: ["Chronicle"]),

        .testTarget(name: "ChronicleLMDBTests", dependencies: ["ChronicleLMDB"]),
        .testTarget(name: "ChronicleSodiumTests", dependencies: ["ChronicleSodium"]),
        // The log's parts that are values (the write queue, the drift guard's rule, the sweep's
        // schedule), tested without a store.
        .testTarget(name: "ChronicleLogTests", dependencies: ["ChronicleLog", "ChronicleFormat"]),
        .testTarget(
            name: "ChronicleTests",
            dependencies: [
                "Chronicle", "ChronicleTesting", "ChronicleFormat", "ChronicleLog", "ChronicleLMDB", "ChronicleSodium", "chronicle-stress",
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "Logging", package: "swift-log"),
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
