#!/usr/bin/env bash
# The main job: the `chronicle demo` tour on the embedded default store.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --product chronicle
exec .build/debug/chronicle demo "$@"
