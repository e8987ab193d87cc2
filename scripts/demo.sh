#!/usr/bin/env bash
# The main job: the `chronicle demo` tour on the embedded default store. The tool lives in the
# nested Tools package (its first build takes several minutes: SwiftNIO, Hummingbird, postgres-nio).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --package-path Tools --product chronicle
exec Tools/.build/debug/chronicle demo "$@"
