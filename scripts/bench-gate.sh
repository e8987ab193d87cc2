#!/usr/bin/env bash
# The speed gate: a release build of the Benchmarks package (the core and raw LMDB, nothing else),
# then chronicle-gate: the README's gated ratios in one process, interleaved rounds, each against
# its threshold in Benchmarks/gate-thresholds.json (1.25× the typical value; a ratio over it is
# measured again once before it fails). Run it alone: other work on the machine moves the ratios,
# and when other processes took over 25% of the machine's CPU during both runs, the gate reports
# its ratios as not judged instead of failing.
#
#   scripts/bench-gate.sh            # exit 1 when a ratio is over its threshold twice
#   scripts/bench-gate.sh --once     # print the ratios, compare nothing
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --package-path Benchmarks --product chronicle-gate
Benchmarks/.build/release/chronicle-gate --thresholds Benchmarks/gate-thresholds.json "$@"
