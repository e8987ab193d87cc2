#!/usr/bin/env bash
# The layering of docs/ARCHITECTURE.md, checked on the imports: the target graph already keeps
# each module from importing what is above it, and this keeps modules from importing what is
# beside or below them that they must not touch (SwiftPM lets a module import any module built
# before it, declared or not).
#   - only the log (ChronicleLog) and its wrapper touch LMDB;
#   - the formats (ChronicleFormat) import nothing that stores, and nothing of the facade;
#   - the log imports nothing of the facade;
#   - the hub and the HTTP protocol import formats, never a store, the log or the client.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
refuse() {  # refuse DESCRIPTION PATTERN DIR...
    local what=$1 pattern=$2
    shift 2
    local found
    found=$(grep -rEn "^\s*(@_spi\([A-Za-z]+\) )*(@testable )?((public|package|internal) )?import ($pattern)\$" "$@" --include='*.swift' || true)
    if [ -n "$found" ]; then
        echo "check-layers: $what:" >&2
        echo "$found" >&2
        status=1
    fi
}
refuse "only ChronicleLog may import ChronicleLMDB" 'ChronicleLMDB|CChronicleLMDB' \
    Sources/Chronicle Sources/ChronicleFormat Sources/ChronicleTesting Sources/ChronicleHTTP Sources/chronicle-stress CLI/Sources Tools/Sources Benchmarks/Sources
refuse "ChronicleFormat imports no storage and nothing above it" 'ChronicleLog|Chronicle|ChronicleTesting|ChronicleHTTP' Sources/ChronicleFormat
refuse "ChronicleLog imports nothing of the facade" 'Chronicle|ChronicleTesting|ChronicleHTTP' Sources/ChronicleLog
refuse "the hub and the protocol are relays: formats only" 'Chronicle|ChronicleLog|ChronicleHTTP|ChronicleHTTPServer|ChronicleSodium|ChronicleLMDB' \
    Tools/Sources/ChronicleHub Tools/Sources/ChronicleSyncProtocol
[ "$status" = 0 ] && echo "check-layers: ok"
exit "$status"
