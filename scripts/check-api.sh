#!/usr/bin/env bash
# The public API of the products an app adds (Chronicle, ChronicleTesting, ChronicleHTTP) against
# the baseline commit in api/baseline: a breaking change (a removed or changed declaration, even a
# parameter added with a default) fails unless api/allowed-breakage.txt lists its exact message.
# An intended break lists it there and gets a "Breaking" entry in CHANGELOG.md, in the same
# commit; a release moves api/baseline to itself and empties the list.
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=$(tr -d '[:space:]' < api/baseline)
if ! git cat-file -e "$baseline^{commit}" 2>/dev/null; then
    # A shallow clone: fetch the baseline commit from where this clone came from.
    git fetch --quiet origin "$baseline" 2>/dev/null || true
fi
if ! git cat-file -e "$baseline^{commit}" 2>/dev/null; then
    echo "check-api: the baseline commit $baseline is not in this clone, and fetching it failed: clone with history" >&2
    exit 1
fi
# Blank lines and comments (#) in the list are not messages.
allowed=$(mktemp)
trap 'rm -f "$allowed"' EXIT
grep -v '^[[:space:]]*\(#\|$\)' api/allowed-breakage.txt > "$allowed" || true
swift package diagnose-api-breaking-changes "$baseline" \
    --products Chronicle ChronicleTesting ChronicleHTTP --breakage-allowlist-path "$allowed"
