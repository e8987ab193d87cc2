#!/usr/bin/env bash
# What an app pays for adding Chronicle. Builds and runs a tiny app package that depends on the
# `Chronicle` product alone and fails unless swift-log is the only package resolved; then resolves
# an app that adds the `ChronicleHTTP` product with the HTTPClient trait, and fails if anything
# of the server, the hub or the benchmarks (Hummingbird, postgres-nio, swift-prometheus,
# swift-argument-parser, GRDB) comes with it; then checks that the everyday `chronicle` tool (the CLI
# package, what the README's first command builds) resolves swift-argument-parser and swift-log
# alone: none of the network stack.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/chronicle-linkage.XXXXXX")
trap 'rm -rf "$work"' EXIT

make_app() {  # make_app DIR PRODUCT TRAITS
    mkdir -p "$1/Sources/App"
    cat > "$1/Package.swift" <<MANIFEST
// swift-tools-version:6.1
import PackageDescription
let package = Package(
    name: "App",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "Chronicle", path: "$root"$3)],
    targets: [.executableTarget(name: "App", dependencies: [.product(name: "$2", package: "Chronicle")])]
)
MANIFEST
}

resolved() {  # the identities of the packages an app's build resolved, one a line, sorted
    swift package --package-path "$1" show-dependencies --format json 2>/dev/null \
        | ROOT="$root" python3 -c 'import json, os, sys
def walk(node, seen):
    for child in node.get("dependencies", []):
        if child.get("url") != os.environ["ROOT"]: seen.add(child["identity"])
        walk(child, seen)
seen = set(); walk(json.load(sys.stdin), seen); print("\n".join(sorted(seen)))'
}

echo "== an app with the Chronicle product =="
make_app "$work/core" Chronicle ""
cat > "$work/core/Sources/App/main.swift" <<'SOURCE'
import Chronicle
import Foundation

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("linkage-\(UUID().uuidString)")
defer { try? FileManager.default.removeItem(at: directory) }
let store = try Store(directory: directory)
try store.set("dark", for: Key<String>("settings.theme", default: "system"))
print("theme:", store[Key<String>("settings.theme", default: "system")])
SOURCE
core=$(resolved "$work/core")
echo "resolved: ${core//$'\n'/, }"
[ "$core" = "swift-log" ] || { echo "check-linkage: the Chronicle product resolved more than swift-log" >&2; exit 1; }
swift build --package-path "$work/core" 2>&1 | tail -n 1
"$work/core/.build/debug/App" | tee "$work/core.out"
grep -qx "theme: dark" "$work/core.out"

echo "== an app with the ChronicleHTTP product (HTTPClient trait) =="
make_app "$work/http" ChronicleHTTP ', traits: ["HTTPClient"]'
echo 'import ChronicleHTTP' > "$work/http/Sources/App/main.swift"
http=$(resolved "$work/http")
echo "resolved: ${http//$'\n'/, }"
for server in hummingbird postgres-nio swift-prometheus swift-argument-parser grdb.swift; do
    if grep -qx "$server" <<<"$http"; then echo "check-linkage: the HTTP client resolved $server" >&2; exit 1; fi
done
grep -qx async-http-client <<<"$http" || { echo "check-linkage: the HTTPClient trait did not bring async-http-client" >&2; exit 1; }

echo "== the everyday tool (CLI package) =="
cli=$(resolved "$root/CLI")
echo "resolved: ${cli//$'\n'/, }"
[ "$cli" = $'swift-argument-parser\nswift-log' ] || { echo "check-linkage: the everyday tool resolved more than swift-argument-parser and swift-log" >&2; exit 1; }
echo "check-linkage: ok"
