#!/usr/bin/env bash
# Installs what the tests need, then runs every check of the repository:
#   1. the core package (what an app adds): build and its whole suite (Swift Testing, in parallel),
#      then its scheduling-sensitive suites again under a CPU hog (scripts/with-cpu-hog.sh);
#   2. the layers (scripts/check-layers.sh: only the log touches LMDB, the hub sees formats only),
#      what an app resolves and links (scripts/check-linkage.sh), and its public API against the
#      baseline commit in api/baseline (scripts/check-api.sh);
#   3. the documentation catalog, built by DocC with warnings as errors (scripts/build-docs.sh);
#   4. the everyday tool alone (the CLI package, what the README's first command builds);
#   5. the nested Tools package (chronicle-server, the hub, the benchmarks, and the tests of both
#      tools): build, the benchmark harness at smoke sizes (so it never rots), then its suite,
#      beside a throwaway PostgreSQL cluster for the hub (scripts/with-postgres.sh starts it);
#   6. the speed gate, alone: the README's gated ratios against Benchmarks/gate-thresholds.json
#      (scripts/bench-gate.sh, a release build of the small Benchmarks package).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

echo "== core: build and tests =="
swift build --build-tests
swift test --skip-build
# A test that lowers the process's address-space limit runs alone, in a process of its own.
CHRONICLE_RLIMIT_TESTS=1 swift test --skip-build --filter UnopenedKeyRecordTests
# The suites that lean hardest on threads, the write queue, observation and the sweep run again
# with every core kept busy by another process: a loaded machine must not turn them red.
echo "== core: the scheduling-sensitive suites again, under a CPU hog =="
scripts/with-cpu-hog.sh swift test --skip-build --filter \
    'QueuedWriteTests|ConcurrencyTests|RetentionTests|CarrierCostBoundsTests|CarrierAbuseTests|ObservationTests|ChangeStreamTests|FaultHandlingTests|LosslessObservationTests|MailboxTests|EchoFreeReplicationRecoveryTests|AutomaticCompactionCostTests|RetentionTamperTests|ReplicationTests'

echo "== the layers: who imports whom =="
scripts/check-layers.sh

echo "== what an app resolves =="
scripts/check-linkage.sh

echo "== the public API against its baseline =="
scripts/check-api.sh

echo "== documentation =="
scripts/build-docs.sh

echo "== the everyday tool: build alone =="
swift build --package-path CLI

echo "== tools: build =="
swift build --package-path Tools --build-tests
scripts/with-postgres.sh bash -c '
    set -euo pipefail
    echo "== benchmark smoke run (tiny sizes; numbers mean nothing here) =="
    Tools/.build/debug/chronicle-bench --smoke > Tools/.build/bench-smoke.log 2>&1 || { cat Tools/.build/bench-smoke.log; exit 1; }
    grep -q "hub push" Tools/.build/bench-smoke.log || { cat Tools/.build/bench-smoke.log; echo "the hub benchmark did not run" >&2; exit 1; }
    grep -q "long-polls held" Tools/.build/bench-smoke.log || { cat Tools/.build/bench-smoke.log; echo "the hub scale rows are missing" >&2; exit 1; }
    grep -q "member import" Tools/.build/bench-smoke.log || { cat Tools/.build/bench-smoke.log; echo "the member import rows are missing" >&2; exit 1; }
    if grep " failed: " Tools/.build/bench-smoke.log; then echo "a benchmark section failed (above)" >&2; exit 1; fi
    tail -n 3 Tools/.build/bench-smoke.log
    echo "== tools: tests =="
    swift test --package-path Tools --skip-build
'

echo "== the speed gate (alone, after the tests) =="
scripts/bench-gate.sh
