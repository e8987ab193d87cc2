// swift-tools-version:6.1
import PackageDescription

// The everyday `chronicle` tool: a store's log, values, keys, checks, imports and exports,
// compaction, sync with another store or a shared folder, and the `demo` tour. It needs the core
// and swift-argument-parser, nothing of the network stack, so a fresh clone builds it in a couple
// of minutes. `serve`, `hub` and HTTP `sync` live in `chronicle-server` (the Tools package, with
// SwiftNIO, Hummingbird and postgres-nio); `chronicle` runs it for them. docs/ARCHITECTURE.md
// says why this is a package of its own.
//
//     swift build --package-path CLI --product chronicle
let package = Package(
    name: "ChronicleCLI",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "chronicle", targets: ["chronicle"]),
        // The everyday commands and what both tools share (store options, output, logging, running).
        .library(name: "ChronicleCommandLine", targets: ["ChronicleCommandLine"]),
    ],
    dependencies: [
        .package(name: "Chronicle", path: ".."),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // prctl for the tools (a header only: nothing to link).
        .systemLibrary(name: "CChronicleSystem"),
        .target(
            name: "ChronicleCommandLine",
            dependencies: [
                "CChronicleSystem",
                .product(name: "Chronicle", package: "Chronicle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "chronicle",
            dependencies: [
                "ChronicleCommandLine",
                .product(name: "Chronicle", package: "Chronicle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
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
