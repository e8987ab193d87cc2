#!/usr/bin/env bash
# Compares the gated ratios of two commits, as the gate measures them: builds chronicle-gate in
# release for each (this checkout's Benchmarks/ package over each commit's core), then runs the two
# in turn, RUNS times each, interleaved (A B A B …), so drift between minutes falls on both.
#
#   scripts/bench-ab.sh OLD NEW [RUNS]     # e.g. scripts/bench-ab.sh 6b5a469 HEAD 3
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/bench-ab.sh OLD NEW [RUNS]" >&2; exit 64; }
runs=${3:-3}
work=$(mktemp -d "${TMPDIR:-/tmp}/chronicle-ab.XXXXXX")
cleanup() {
    for side in a b; do git worktree remove --force "$work/$side" >/dev/null 2>&1 || true; done
    rm -rf "$work"
}
trap cleanup EXIT
for side in a b; do
    commit=$([ "$side" = a ] && echo "$1" || echo "$2")
    git worktree add --detach --quiet "$work/$side" "$commit"
    # The gate of this checkout measures that commit's core (older commits have no Benchmarks/).
    rm -rf "$work/$side/Benchmarks"
    mkdir -p "$work/$side/Benchmarks"
    cp -R Benchmarks/Package.swift Benchmarks/Sources "$work/$side/Benchmarks/"
    echo "== building $side: $commit ($(git rev-parse --short "$commit"))"
    # Cores before the sweep could be waited for build the gate's fallback (see settleSweep).
    flags=()
    git grep -q waitForAutomaticCompaction "$commit" -- Sources || flags=(-Xswiftc -DGATE_OLDER_CORE)
    swift build -c release --package-path "$work/$side/Benchmarks" --product chronicle-gate "${flags[@]}" >/dev/null
done
for run in $(seq 1 "$runs"); do
    for side in a b; do
        commit=$([ "$side" = a ] && echo "$1" || echo "$2")
        echo "== run $run, $side ($commit)"
        "$work/$side/Benchmarks/.build/release/chronicle-gate" --once
    done
done
