// swift-tools-version:6.1
import PackageDescription

// The speed gate and what the benchmarks share: the core and raw LMDB, nothing else, so CI builds
// it in release in a couple of minutes (the Tools package, with SwiftNIO, Hummingbird and
// postgres-nio, takes far longer). `chronicle-gate` measures the gated ratios in one process,
// interleaved; Tools' `chronicle-bench` uses the same raw-LMDB peers for its full table.
//
//     scripts/bench-gate.sh                  # release build, then the gate against Benchmarks/gate-thresholds.json
//     scripts/bench-ab.sh OLD NEW            # the same ratios for two commits, runs interleaved
let package = Package(
    name: "ChronicleBenchmarks",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ChronicleBenchSupport", targets: ["ChronicleBenchSupport"]),
        .executable(name: "chronicle-gate", targets: ["chronicle-gate"]),
    ],
    dependencies: [
        .package(name: "Chronicle", path: "..")
    ],
    targets: [
        // The raw-LMDB peers call mdb_put/mdb_get themselves, without Chronicle's wrapper, so the
        // ratios show what the wrapper and the domain cost. (Not `CChronicleLMDB`: SwiftPM refuses
        // two targets of one name in a graph, and that one belongs to the root package.)
        .systemLibrary(name: "CGateLMDB", pkgConfig: "lmdb", providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]),
        .target(name: "ChronicleBenchSupport", dependencies: ["CGateLMDB"]),
        .executableTarget(
            name: "chronicle-gate",
            dependencies: [.product(name: "Chronicle", package: "Chronicle"), "ChronicleBenchSupport"]),
    ]
)

for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [.swiftLanguageMode(.v6)]
}
