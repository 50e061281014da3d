# Tidemark developer entry points. Every target first runs `setup`, so a fresh
# clone needs nothing but python3, make and (for Java) apt-get.

SHELL := /bin/bash

VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := setup
.PHONY: setup java chromium test run bench bench-steps bench-storage bench-ivm bench-scheduler bench-webhook bench-replication bench-write bench-soak lint format clean slt slt-materialize

## setup: .venv with the pinned dependencies, the project installed editable, Java 17, Chromium (UI test).
setup: $(STAMP) java chromium

$(BIN)/python:
	python3 -m venv $(VENV)

# Reinstall only when the dependency declarations change. uv installs the
# lock in a third of pip's time or less (a fresh venv on this 2-core machine:
# pip 187-339 s, uv 63 s with bytecode compiled); `make test` on a clean
# clone (.ci/run) pays it every run. --compile-bytecode as pip does: where
# PYTHONDONTWRITEBYTECODE is set nothing writes .pyc files later, and every
# process (each test's `tidemark serve`, dagster, workers) then compiles its
# imports again: 4.5-5.1 s to import dagster and pyspark instead of 2.3-2.7.
UV_VERSION := 0.13.9
$(STAMP): pyproject.toml requirements.lock | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -r requirements.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
	touch $@

# Checked on every run (it is quick) because Java can change under the venv.
java:
	scripts/ensure_java.sh

chromium:
	scripts/ensure_chromium.sh

## test: lint, then the whole pytest suite (slow tests included) on two workers, one JVM at a time.
test: lint
	$(BIN)/pytest -n 2

## run: `tidemark serve` and `dagster dev` on the demo project (demo/); Ctrl-C stops both.
run: setup
	scripts/run_demo.sh

## bench: Nexmark q0-q9, q20: Tidemark step vs Spark, SDP and DuckDB recomputes, freshness
## (bench/nexmark.py; NEXMARK_EVENTS, NEXMARK_REPEAT, ... or BENCH_ARGS resize it).
BENCH_ARGS ?=
bench: setup
	$(BIN)/python -m bench.nexmark $(BENCH_ARGS)

## bench-steps: Tidemark's step for the same delta over growing bases, in-process
## (bench/nexmark_steps.py; BENCH_ARGS e.g. --bases 100000,1000000 --delta 100).
bench-steps: setup
	$(BIN)/python -m bench.nexmark_steps $(BENCH_ARGS)

## bench-storage: the storage benchmark (bench/storage.py).
bench-storage: setup
	$(BIN)/python -m bench.storage

## bench-ivm: the incremental view maintenance benchmark (bench/ivm.py).
bench-ivm: setup
	$(BIN)/python -m bench.ivm

## bench-scheduler: scheduler tick cost (10k tasks, 16 captures) and drain time (bench/scheduler_bench.py),
## then draining a real worker holding 100 views (bench/scheduler_workers.py; a few minutes).
bench-scheduler: setup
	$(BIN)/python -m bench.scheduler_bench
	$(BIN)/python -m bench.scheduler_workers

## bench-webhook: webhook requests/s and time to a 200 over loopback (bench/webhook.py).
bench-webhook: setup
	$(BIN)/python -m bench.webhook

## bench-replication: a PostgreSQL source under pgbench: changes/s and lag p50/p99 (bench/replication.py).
bench-replication: setup
	$(BIN)/python -m bench.replication

## bench-write: pgbench one-row INSERTs (1/8/32 clients), COPY of 1M CSV rows and 64-client
## webhooks, Tidemark beside a PostgreSQL 15 it starts, with py-spy profiles (bench/write.py;
## BENCH_WRITE_SECONDS=30, BENCH_WRITE_CLIENTS, BENCH_WRITE_COPY_ROWS, BENCH_WRITE_WEBHOOK_SECONDS).
bench-write: setup
	scripts/ensure_postgres.sh
	$(BIN)/python -m bench.write

## bench-soak: the demo server (load generator, webhook, views, index) under a scripted user
## (psycopg queries and writes, HTTP, SUBSCRIBE, canceled queries) for SOAK_SECONDS (an hour),
## its RSS sampled to bench/results/soak.csv, soak.png and soak.json (bench/soak.py).
SOAK_SECONDS ?= 3600
bench-soak: setup
	$(BIN)/python -m bench.soak --duration $(SOAK_SECONDS)

## slt: the sqllogictest corpus (SLT_DIR) through the coordinator; per-file pass counts;
## fails below SLT_MIN_PASS_RATE percent (the issue's target, 95).
SLT_DIR ?= tests/slt
SLT_MIN_PASS_RATE ?= 95
SLT_ARGS ?=
slt: setup
	$(BIN)/python -m coordinator_lib.sqllogictest --min-pass-rate $(SLT_MIN_PASS_RATE) $(SLT_ARGS) $(SLT_DIR)/*.test $(SLT_DIR)/evidence/*.test

## slt-materialize: Materialize's own sqllogictest files (MZ_SLT_DIR: a directory of
## MaterializeInc/materialize's test/sqllogictest/*.slt, not kept in this repository; docs/slt.md
## lists the files and commits measured) through pgwire; pass rate per file and failure classes.
MZ_SLT_DIR ?=
slt-materialize: setup
	@test -n "$(MZ_SLT_DIR)" || { echo "set MZ_SLT_DIR to a directory of Materialize's .slt files (docs/slt.md)"; exit 2; }
	$(BIN)/python -m coordinator_lib.slt_materialize $(SLT_ARGS) $(MZ_SLT_DIR)

## lint: ruff check, ruff format --check, the type check (mypy) and the layers
## contract (lint-imports, [tool.importlinter] in pyproject.toml); all must pass.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## format: rewrite files with ruff format, then apply ruff's safe fixes.
format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## clean: remove the virtualenv and all local data.
clean:
	rm -rf $(VENV) data
