#!/usr/bin/env bash
# Installs the system libraries Chronicle links against (liblmdb, libsodium; libsqlite3
# for the benchmark peer; python3-lmdb for a test's forger; prometheus for the hub's metrics
# tests) and pkg-config, when they are missing. Uses sudo only when not root.
set -euo pipefail

missing=()
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
pkg-config --exists lmdb 2>/dev/null || missing+=(liblmdb-dev)
pkg-config --exists libsodium 2>/dev/null || missing+=(libsodium-dev)
pkg-config --exists sqlite3 2>/dev/null || missing+=(libsqlite3-dev)  # GRDB, for the benchmarks only
# The forger of the tool's tamper-evidence tests (Tools/Tests/Forger): Debian's python3 with py-lmdb.
/usr/bin/python3 -c 'import lmdb' 2>/dev/null || missing+=(python3-lmdb)
# The hub's metrics tests: Prometheus's `promtool` checks the page, and a `prometheus` server
# scrapes a node (Debian's package; on a machine with systemd it also installs a service).
command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: please install ${missing[*]} with your package manager" >&2
    exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Another install (a second clone's suite, an unattended upgrade) may hold dpkg's lock: wait for
# it rather than fail.
$sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
$sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
