#!/usr/bin/env bash
# `make run`: `tidemark serve` and `dagster dev` side by side on the demo
# project (demo/sql), its data under demo/data and Dagster's under
# demo/dagster_home. Ctrl-C (or either one exiting) stops both.
#
#   Dagster UI      http://127.0.0.1:3000
#   SQL (pgwire)    psql -h 127.0.0.1 -p 6875 -U materialize materialize
#   HTTP / webhook  http://127.0.0.1:6876/api/sql, /api/webhook/<db>/<schema>/<source>
#
# Environment overrides: TIDEMARK_PROJECT (a project folder: its sql/, data
# in <project>/data, Dagster in <project>/dagster_home unless
# TIDEMARK_DATA_DIR / DAGSTER_HOME say otherwise), DAGSTER_PORT, PGWIRE_PORT,
# HTTP_PORT. tests/ui/test_make_run.py runs it that way on a copy of demo/.
#
# Each runs as its own job (process group), so stopping reaches everything
# it started (Dagster's webserver, daemon, code server and run workers, and
# their JVMs): SIGINT first, SIGKILL for whatever is left after 20 s. Job
# control (`set -m`) also keeps SIGINT working in them: without it a script's
# background commands start with SIGINT ignored.
set -euo pipefail
set -m

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=.venv/bin
export TIDEMARK_PROJECT="${TIDEMARK_PROJECT:-$PWD/demo}"
export TIDEMARK_DATA_DIR="${TIDEMARK_DATA_DIR:-$TIDEMARK_PROJECT/data}"
export DAGSTER_HOME="${DAGSTER_HOME:-$TIDEMARK_PROJECT/dagster_home}"
DAGSTER_PORT="${DAGSTER_PORT:-3000}"
PGWIRE_PORT="${PGWIRE_PORT:-6875}"
HTTP_PORT="${HTTP_PORT:-6876}"
mkdir -p "$TIDEMARK_DATA_DIR" "$DAGSTER_HOME"

groups=()
start() {
    "$@" &
    groups+=($!)
}

alive() {
    local group
    for group in "${groups[@]}"; do
        kill -0 -- "-$group" 2>/dev/null && return 0
    done
    return 1
}

stop() {
    trap - INT TERM EXIT
    echo "stopping tidemark serve and dagster dev..."
    local group
    for group in "${groups[@]}"; do
        kill -INT -- "-$group" 2>/dev/null || true
    done
    for _ in $(seq 1 40); do
        alive || return 0
        sleep 0.5
    done
    for group in "${groups[@]}"; do
        kill -KILL -- "-$group" 2>/dev/null || true
    done
}
trap stop INT TERM EXIT

start "$BIN/tidemark" serve --data-dir "$TIDEMARK_DATA_DIR" \
    --pgwire-port "$PGWIRE_PORT" --http-port "$HTTP_PORT"
start "$BIN/dagster" dev -f definitions.py -h 127.0.0.1 -p "$DAGSTER_PORT"

echo "tidemark: pgwire 127.0.0.1:$PGWIRE_PORT, HTTP 127.0.0.1:$HTTP_PORT;" \
    "Dagster UI http://127.0.0.1:$DAGSTER_PORT. Ctrl-C stops both."
# Whichever exits first (Ctrl-C, a crash) takes the other down with it.
wait -n "${groups[@]}" || true
