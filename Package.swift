// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Chronicle",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "Chronicle", targets: ["Chronicle"]),
        .library(name: "ChronicleTesting", targets: ["ChronicleTesting"]),
        .executable(name: "chronicle", targets: ["chronicle"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // System libraries: the only modules that see C declarations, through the wrappers below.
        .systemLibrary(name: "CLMDB", pkgConfig: "lmdb", providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]),
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"]), .brew(["libsodium"])]),

        // Safe Swift wrappers.
        .target(name: "LMDB", dependencies: ["CLMDB"]),
        .target(name: "Sodium", dependencies: ["CSodium"]),

        // The domain.
        .target(
            name: "Chronicle",
            dependencies: [
                "LMDB",
                "Sodium",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // Test support for apps and transports: a transport conformance suite and fault injection.
        .target(name: "ChronicleTesting", dependencies: ["Chronicle"]),

        // The command-line tool.
        .executableTarget(
            name: "chronicle",
            dependencies: [
                "Chronicle",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/chronicle"
        ),

        .testTarget(name: "LMDBTests", dependencies: ["LMDB"]),
        .testTarget(name: "SodiumTests", dependencies: ["Sodium"]),
        .testTarget(name: "ChronicleTests", dependencies: ["Chronicle", "ChronicleTesting", "LMDB", "chronicle"]),
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
