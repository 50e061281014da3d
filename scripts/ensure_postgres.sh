#!/usr/bin/env bash
# Make sure PostgreSQL 15's server binaries (initdb, pg_ctl, postgres) and its
# clients (psql, pgbench) are installed: make bench-write runs pgbench and \copy
# against Tidemark and against a PostgreSQL it starts (tests/fixtures/postgres.py).
set -euo pipefail

have() {
    command -v pgbench >/dev/null 2>&1 && command -v psql >/dev/null 2>&1 \
        && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}

if have; then
    exit 0
fi
if [[ $(id -u) -ne 0 ]] && ! command -v sudo >/dev/null 2>&1; then
    echo "ensure_postgres: need root (or sudo) to apt-get install postgresql" >&2
    exit 1
fi
SUDO=$([[ $(id -u) -eq 0 ]] && echo "" || echo sudo)
echo "ensure_postgres: installing postgresql (server, psql, pgbench)" >&2
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql postgresql-client \
    || { $SUDO apt-get update && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql postgresql-client; }
have || { echo "ensure_postgres: postgresql is still missing" >&2; exit 1; }
