#!/usr/bin/env bash
# Runs a command while every core is kept busy by another process at the same priority (a busy
# loop per core, as an app's other work or a second clone's suite would): what a test that
# depends on scheduling meets on a loaded machine. The hog stops with the command.
#   scripts/with-cpu-hog.sh swift test --skip-build --filter QueuedWriteTests
set -euo pipefail
hogs=()
stop() { for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap stop EXIT
for _ in $(seq "$(nproc)"); do
    bash -c 'while :; do :; done' &
    hogs+=($!)
done
"$@"
