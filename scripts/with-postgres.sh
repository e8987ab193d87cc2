#!/usr/bin/env bash
# Runs a command beside a throwaway PostgreSQL cluster (for the hub's tests and benchmark):
# installs Debian's `postgresql` when no server is found (sudo only when not root), creates a
# cluster in a temporary directory, starts it on a free loopback port, exports its URL as
# CHRONICLE_TEST_DATABASE, runs the command, then stops the server and deletes the directory.
# PostgreSQL refuses to run as root: as root, the cluster belongs to the unprivileged system
# user `chronicle-pg` (created when missing).
#
#   scripts/with-postgres.sh swift test
set -euo pipefail

find_bin() {
    local dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        [ -x "$dir/pg_ctl" ] && [ -x "$dir/initdb" ] && { echo "$dir"; return 0; }
    done
    command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1 && { dirname "$(command -v pg_ctl)"; return 0; }
    return 1
}

if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
if ! bin=$(find_bin); then
    echo "with-postgres: installing postgresql" >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
    $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq postgresql >/dev/null
    bin=$(find_bin)
fi

run_as=()
if [ "$(id -u)" -eq 0 ]; then
    # Two suites starting at once may both find the user missing: the loser's useradd fails, the user exists.
    id chronicle-pg >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin chronicle-pg 2>/dev/null || id chronicle-pg >/dev/null
    run_as=(runuser -u chronicle-pg --)
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/chronicle-pg.XXXXXX")
chmod 755 "$work"
[ ${#run_as[@]} -gt 0 ] && chown chronicle-pg "$work"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')

stop() {
    "${run_as[@]}" "$bin/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap stop EXIT

"${run_as[@]}" "$bin/initdb" -D "$work/data" -U chronicle -A trust --no-sync -E UTF8 >"$work/initdb.log" 2>&1 \
    || { cat "$work/initdb.log" >&2; exit 1; }
# fsync off: a test cluster, thrown away afterwards (CHRONICLE_PG_DURABLE=1 keeps PostgreSQL's
# flushes, for a benchmark of commits); max_connections for several hub nodes.
durability="-c fsync=off -c synchronous_commit=off"
[ "${CHRONICLE_PG_DURABLE:-}" = 1 ] && durability="-c fsync=on -c synchronous_commit=on"
"${run_as[@]}" "$bin/pg_ctl" -D "$work/data" -l "$work/server.log" -w -o \
    "-p $port -k $work -c listen_addresses=127.0.0.1 $durability -c max_connections=200" start >/dev/null \
    || { cat "$work/server.log" >&2; exit 1; }

export CHRONICLE_TEST_DATABASE="postgres://chronicle@127.0.0.1:$port/postgres"
export CHRONICLE_TEST_PG_CTL="$bin/pg_ctl"
export CHRONICLE_TEST_PG_DATA="$work/data"
export CHRONICLE_TEST_PG_RUN_AS="${run_as[*]}"
echo "with-postgres: PostgreSQL $("$bin/pg_ctl" --version | awk '{print $3}') on 127.0.0.1:$port" >&2
set +e
"$@"
status=$?
set -e
exit $status
