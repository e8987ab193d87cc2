#!/usr/bin/env bash
# Builds the Chronicle module's documentation catalog with DocC, warnings as errors: a broken
# symbol link, an undocumented parameter or an ambiguous reference fails the build. Uses the
# toolchain's `docc` and SwiftPM's symbol graphs (no plugin: nothing is added to an app's graph).
#
#   scripts/build-docs.sh [OUTPUT-DIR]     (default: .build/documentation)
set -euo pipefail
cd "$(dirname "$0")/.."
output=${1:-.build/documentation}
graphs=$(mktemp -d "${TMPDIR:-/tmp}/chronicle-symbols.XXXXXX")
trap 'rm -rf "$graphs"' EXIT
swift package dump-symbol-graph --minimum-access-level public >"$graphs/dump.log" 2>&1 \
    || { cat "$graphs/dump.log" >&2; exit 1; }
rm "$graphs/dump.log"
# The Chronicle module's graph, with the format types it re-exports from ChronicleFormat
# (ChronicleError, ReplicaID, SyncPolicy, …): an app finds them through `import Chronicle`, so
# its documentation shows them there. SwiftPM's dump cannot ask for re-exported symbols, so the
# graph is extracted again from the modules that dump built.
modules="$(swift build --show-bin-path)/Modules"
swift-symbolgraph-extract -module-name Chronicle -I "$modules" \
    -I Sources/CChronicleLMDB -I Sources/CChronicleSodium \
    -target "$(uname -m)-unknown-linux-gnu" -minimum-access-level public -output-dir "$graphs" \
    -experimental-allowed-reexported-modules=ChronicleFormat
docc convert Sources/Chronicle/Documentation.docc \
    --additional-symbol-graph-dir "$graphs" \
    --fallback-display-name Chronicle --fallback-bundle-identifier org.chronicle.Chronicle \
    --output-path "$output" --warnings-as-errors
echo "build-docs: $output"
