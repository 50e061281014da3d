"""UNIQUE / PRIMARY KEY enforced by group commit (adapter/group_commit.py):
23505 with nothing of the statement written, checked against the table at
the write's timestamp and the writers committed with it, for concurrent
sessions and for two coordinators on one environment.

Small tables run in-process, so these coordinators never start Spark (a
LazySparkSession that is never asked for a session)."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator_lib.adapter.client import Handle, SessionClient, serve
from coordinator_lib.adapter.errors import AdapterError
from tests.adapter.conftest import fast_config, run_on


@pytest.fixture
def env(tmp_path: Path) -> Path:
    return tmp_path / "env"


@pytest.fixture
def local_handle(env: Path) -> Iterator[Handle]:
    handle = serve(fast_config(env), None)
    try:
        yield handle
    finally:
        handle.shutdown()


def open_session(handle: Handle) -> SessionClient:
    return handle.client.startup("materialize", "materialize")


def fails_23505(run: Any, sql: str, constraint: str) -> AdapterError:
    with pytest.raises(AdapterError) as info:
        run(sql)
    assert info.value.code == "23505"
    assert info.value.message == f'duplicate key value violates unique constraint "{constraint}"'
    return info.value


def test_duplicates_fail_whole_statement(local_handle: Handle) -> None:
    run = run_on(open_session(local_handle))
    run("CREATE TABLE t (a int PRIMARY KEY, b text UNIQUE, c int)")
    run("INSERT INTO t VALUES (1, 'x', 0), (2, 'y', 0)")
    error = fails_23505(run, "INSERT INTO t VALUES (3, 'z', 1), (1, 'w', 1)", "t_pkey")
    assert error.detail == "Key (a)=(1) already exists."
    fails_23505(run, "INSERT INTO t VALUES (4, 'q', 2), (4, 'r', 2)", "t_pkey")  # same statement
    fails_23505(run, "INSERT INTO t VALUES (5, 'x', 3)", "t_b_key")
    fails_23505(run, "INSERT INTO t SELECT a + 10, b, 4 FROM t", "t_b_key")
    assert sorted(run("SELECT * FROM t")) == [(1, "x", 0), (2, "y", 0)]  # nothing half-written
    # NULLs never conflict under UNIQUE; PRIMARY KEY columns are NOT NULL.
    run("INSERT INTO t VALUES (3, NULL, 5), (4, NULL, 5)")
    with pytest.raises(AdapterError) as info:
        run("INSERT INTO t VALUES (NULL, 'n', 6)")
    assert info.value.code == "23502"
    # UPDATE: checked on the statement's result (retractions free their keys).
    fails_23505(run, "UPDATE t SET a = 1 WHERE a = 2", "t_pkey")
    run("UPDATE t SET a = a + 1")
    run("DELETE FROM t WHERE a = 5")
    run("INSERT INTO t VALUES (1, 'x2', 7)")
    assert sorted(run("SELECT a, b FROM t")) == [(1, "x2"), (2, "x"), (3, "y"), (4, None)]


def test_transaction_statement_fails_early_and_commit_writes_nothing(
    local_handle: Handle,
) -> None:
    run = run_on(open_session(local_handle))
    run("CREATE TABLE t (a int, b int, PRIMARY KEY (a, b))")
    run("INSERT INTO t VALUES (1, 1)")
    run("BEGIN")
    run("INSERT INTO t VALUES (1, 2)")
    fails_23505(run, "INSERT INTO t VALUES (1, 2)", "t_pkey")  # against the transaction's own
    run("COMMIT")
    assert run("SELECT * FROM t") == [(1, 1)]
    run("BEGIN")
    run("INSERT INTO t VALUES (2, 2)")
    run("INSERT INTO t VALUES (3, 3)")
    run("COMMIT")
    assert sorted(run("SELECT * FROM t")) == [(1, 1), (2, 2), (3, 3)]


def test_concurrent_writers_never_both_insert_a_key(local_handle: Handle) -> None:
    """Writers race on overlapping keys: each statement lands whole or not at
    all, no key is held twice, and every success is visible."""
    setup = run_on(open_session(local_handle))
    setup("CREATE TABLE t (k int PRIMARY KEY, writer int, n int)")
    writers, statements = 6, 8
    landed: dict[int, list[int]] = {w: [] for w in range(writers)}
    failed: list[tuple[int, int]] = []
    other_errors: list[BaseException] = []
    barrier = threading.Barrier(writers)

    def write(w: int) -> None:
        rng = random.Random(w)
        run = run_on(open_session(local_handle))
        barrier.wait()
        for n in range(statements):
            keys = rng.sample(range(20), 2)
            values = ", ".join(f"({k}, {w}, {n})" for k in keys)
            try:
                run(f"INSERT INTO t VALUES {values}")
                landed[w].append(n)
            except AdapterError as error:
                if error.code != "23505":
                    other_errors.append(error)
                failed.append((w, n))
            except BaseException as error:  # pragma: no cover - reported below
                other_errors.append(error)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not other_errors
    rows = setup("SELECT k, writer, n FROM t")
    keys = [k for k, _, _ in rows]
    assert len(keys) == len(set(keys))
    statements_seen = {(w, n) for _, w, n in rows}
    # Two rows per successful statement, none from a failed one.
    assert statements_seen == {(w, n) for w, ns in landed.items() for n in ns}
    assert len(rows) == 2 * len(statements_seen)
    assert not statements_seen & set(failed)
    assert failed  # 48 random pairs from 20 keys: some must collide


def test_two_coordinators_on_one_environment(env: Path, local_handle: Handle) -> None:
    """A second process-like coordinator on the same data: its writes are
    checked against the first's (the append expects the upper it checked at)."""
    first = run_on(open_session(local_handle))
    first("CREATE TABLE t (k int UNIQUE, who text)")
    first("INSERT INTO t VALUES (1, 'first')")
    second_handle = serve(fast_config(env), None)
    try:
        second = run_on(open_session(second_handle))
        fails_23505(second, "INSERT INTO t VALUES (1, 'second')", "t_k_key")
        second("INSERT INTO t VALUES (2, 'second')")
        # first's cached key counts are stale now: it must see the 2.
        fails_23505(first, "INSERT INTO t VALUES (2, 'first')", "t_k_key")
        results: dict[str, Any] = {}
        barrier = threading.Barrier(2)

        def race(name: str, run: Any) -> None:
            barrier.wait()
            try:
                run(f"INSERT INTO t VALUES (3, '{name}')")
                results[name] = "ok"
            except AdapterError as error:
                results[name] = error.code
                results[name + "_msg"] = error.message

        threads = [
            threading.Thread(target=race, args=("first", first)),
            threading.Thread(target=race, args=("second", second)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(results[n] for n in ("first", "second")) == ["23505", "ok"], results
        assert sorted(k for (k,) in first("SELECT k FROM t")) == [1, 2, 3]
    finally:
        second_handle.shutdown()


def test_constraints_survive_a_restart_and_show_create(env: Path) -> None:
    handle = serve(fast_config(env), None)
    try:
        run = run_on(open_session(handle))
        run("CREATE TABLE t (a int PRIMARY KEY, b text, CONSTRAINT b_once UNIQUE (b))")
        run("INSERT INTO t VALUES (1, 'x')")
    finally:
        handle.shutdown()
    handle = serve(fast_config(env), None)
    try:
        run = run_on(open_session(handle))
        (_, create_sql), *_ = run("SHOW CREATE TABLE t")
        assert "a INT PRIMARY KEY" in create_sql and "CONSTRAINT b_once UNIQUE (b)" in create_sql
        assert run("SHOW COLUMNS FROM t")[0][:2] == ("a", False)  # PRIMARY KEY: NOT NULL
        fails_23505(run, "INSERT INTO t VALUES (2, 'x')", "b_once")
        fails_23505(run, "INSERT INTO t VALUES (1, 'y')", "t_pkey")
    finally:
        handle.shutdown()


def test_drop_table_drops_its_indexes(local_handle: Handle) -> None:
    run = run_on(open_session(local_handle))
    run("CREATE TABLE t (a int)")
    run("CREATE INDEX t_a ON t (a)")
    run("CREATE VIEW v AS SELECT a FROM t")
    with pytest.raises(AdapterError) as info:
        run("DROP TABLE t")  # a view is not part of its table: CASCADE needed
    assert info.value.code == "2BP01"
    run("DROP VIEW v")
    run("DROP TABLE t")
    run("CREATE TABLE t (a int)")
    run("CREATE INDEX t_a ON t (a)")  # the index went with its table: the name is free
    run("INSERT INTO t VALUES (1)")
    assert run("SELECT a FROM t") == [(1,)]
