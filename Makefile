# Tidemark developer entry points. Every target first runs `setup`, so a fresh
# clone needs nothing but python3, make and (for Java) apt-get.

SHELL := /bin/bash

VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := setup
.PHONY: setup java test run bench-storage bench-ivm lint format clean

## setup: .venv with the pinned dependencies, the project installed editable, Java 17.
setup: $(STAMP) java

$(BIN)/python:
	python3 -m venv $(VENV)

# Reinstall only when the dependency declarations change.
$(STAMP): pyproject.toml requirements.lock | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

# Checked on every run (it is quick) because Java can change under the venv.
java:
	scripts/ensure_java.sh

## test: lint, then the whole pytest suite (slow tests included).
test: lint
	$(BIN)/pytest

## run: the storage demo, writing under ./data/demo.
run: setup
	$(BIN)/tidemark demo

## bench-storage: the storage benchmark (bench/storage.py).
bench-storage: setup
	$(BIN)/python -m bench.storage

## bench-ivm: the incremental view maintenance benchmark (bench/ivm.py).
bench-ivm: setup
	$(BIN)/python -m bench.ivm

## lint: ruff check and ruff format --check; both must pass.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## format: rewrite files with ruff format, then apply ruff's safe fixes.
format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## clean: remove the virtualenv and all local data.
clean:
	rm -rf $(VENV) data
