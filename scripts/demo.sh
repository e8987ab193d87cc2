#!/usr/bin/env bash
# The main job: the `chronicle demo` tour on the embedded default store. The everyday tool is the
# CLI package: the core and swift-argument-parser, none of the network stack, so a fresh clone
# builds it in a minute or two (`chronicle-server`, with the HTTP server and the hub, is Tools/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --package-path CLI --product chronicle
exec CLI/.build/debug/chronicle demo "$@"
