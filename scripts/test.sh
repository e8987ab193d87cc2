#!/usr/bin/env bash
# Installs what the tests need, builds everything, runs the benchmark harness at
# smoke sizes (so it never rots), then runs the whole suite (Swift Testing, in parallel) beside
# a throwaway PostgreSQL cluster for the hub's tests (scripts/with-postgres.sh installs and starts it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --build-tests
# One throwaway PostgreSQL server for the hub's benchmark rows and tests (scripts/with-postgres.sh).
scripts/with-postgres.sh bash -c '
    set -euo pipefail
    echo "== benchmark smoke run (tiny sizes; numbers mean nothing here) =="
    .build/debug/chronicle-bench --smoke > .build/bench-smoke.log 2>&1 || { cat .build/bench-smoke.log; exit 1; }
    grep -q "hub push" .build/bench-smoke.log || { cat .build/bench-smoke.log; echo "the hub benchmark did not run" >&2; exit 1; }
    grep -q "member import" .build/bench-smoke.log || { cat .build/bench-smoke.log; echo "the member import rows are missing" >&2; exit 1; }
    if grep " failed: " .build/bench-smoke.log; then echo "a benchmark section failed (above)" >&2; exit 1; fi
    tail -n 3 .build/bench-smoke.log
    echo "== tests =="
    swift test --skip-build
'
