"""One bad row never stops the world (issue 18): a view whose query fails on
a row (division by zero) answers reads with that error while the row is
there, every other view keeps answering and moving, the error survives a
restart and goes away with the row. Over pgwire with psycopg, in-process
engine (no Spark)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import fast_config

pytestmark = pytest.mark.timeout(120)


@contextmanager
def running(data_dir: Path) -> Iterator[psycopg.Connection[Any]]:
    """An environment on `data_dir` (reopened if it exists) and a connection."""
    env = Environment(fast_config(data_dir), pgwire_port=0, http_port=0)
    env.start()
    try:
        dsn = f"host=127.0.0.1 port={env.pgwire.port} user=materialize dbname=materialize"
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            yield conn
    finally:
        env.stop()


def rows(conn: psycopg.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    return conn.execute(sql).fetchall()


def assert_division_by_zero(conn: psycopg.Connection[Any], sql: str) -> None:
    with pytest.raises(psycopg.errors.DivisionByZero) as raised:
        conn.execute(sql)
    assert raised.value.sqlstate == "22012"
    assert raised.value.diag.message_primary == "division by zero"


ERRORS = "SELECT name, code, error, count FROM mz_internal.mz_compute_error_counts ORDER BY name"


def test_a_failing_row_fails_only_its_view(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    data_dir = tmp_path / "env"
    with running(data_dir) as conn:
        conn.execute("CREATE TABLE a (x int, y int)")
        conn.execute("CREATE TABLE b (v int)")
        conn.execute("INSERT INTO a VALUES (6, 2)")
        conn.execute("INSERT INTO b VALUES (1)")
        conn.execute("CREATE MATERIALIZED VIEW a_div AS SELECT x / y AS q FROM a")
        conn.execute("CREATE MATERIALIZED VIEW b_v AS SELECT v FROM b")
        assert rows(conn, "SELECT q FROM a_div") == [(3,)]

        conn.execute("INSERT INTO a VALUES (1, 0), (1, 0)")
        assert_division_by_zero(conn, "SELECT q FROM a_div")
        assert_division_by_zero(conn, "SELECT count(*) FROM a_div")  # a query over it too
        # Other views answer, and are fresh.
        conn.execute("INSERT INTO b VALUES (2)")
        assert rows(conn, "SELECT v FROM b_v ORDER BY v") == [(1,), (2,)]
        conn.execute("CREATE MATERIALIZED VIEW late AS SELECT v * 10 AS w FROM b")
        assert rows(conn, "SELECT w FROM late ORDER BY w") == [(10,), (20,)]
        # A view over the failing view inherits its error.
        conn.execute("CREATE MATERIALIZED VIEW a_over AS SELECT q + 1 AS r FROM a_div")
        assert_division_by_zero(conn, "SELECT r FROM a_over")
        assert rows(conn, ERRORS) == [
            ("a_div", "22012", "division by zero", 2),
            ("a_over", "22012", "division by zero", 2),
        ]

    with running(data_dir) as conn:  # the same data directory, a new process state
        assert_division_by_zero(conn, "SELECT q FROM a_div")
        conn.execute("INSERT INTO b VALUES (3)")
        assert rows(conn, "SELECT w FROM late ORDER BY w") == [(10,), (20,), (30,)]
        conn.execute("DELETE FROM a WHERE y = 0")
        assert rows(conn, "SELECT q FROM a_div") == [(3,)]
        assert rows(conn, "SELECT r FROM a_over") == [(4,)]
        assert rows(conn, ERRORS) == []
        conn.execute("INSERT INTO a VALUES (5, 0)")
        assert_division_by_zero(conn, "SELECT q FROM a_div")

    with running(data_dir) as conn:
        assert rows(conn, ERRORS) == [
            ("a_div", "22012", "division by zero", 1),
            ("a_over", "22012", "division by zero", 1),
        ]
        assert rows(conn, "SELECT v FROM b_v ORDER BY v") == [(1,), (2,), (3,)]

    # No traceback was logged, nor any warning about the view's dataflow.
    assert not [r for r in caplog.records if r.exc_info], caplog.text[:2000]
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [w for w in warnings if "division by zero" in w], warnings


@pytest.mark.spark
def test_on_spark_a_failing_row_fails_only_its_view(tmp_path: Path, spark: Any) -> None:
    """Every step on Spark: division by zero goes to the error collection
    (the job does not fail); an overflow, which Spark still raises, stops
    only its own view, whose reads answer 22003 instead of waiting."""
    config = fast_config(tmp_path / "env", local_max_rows=0)
    env = Environment(config, pgwire_port=0, http_port=0, spark=spark)
    env.start()
    try:
        dsn = f"host=127.0.0.1 port={env.pgwire.port} user=materialize dbname=materialize"
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute("CREATE TABLE a (x int, y int)")
            conn.execute("CREATE TABLE b (v int)")
            conn.execute("INSERT INTO a VALUES (6, 2)")
            conn.execute("INSERT INTO b VALUES (1)")
            conn.execute("CREATE MATERIALIZED VIEW a_div AS SELECT x / y AS q FROM a")
            conn.execute("CREATE MATERIALIZED VIEW a_big AS SELECT x * 1000000000 AS m FROM a")
            conn.execute("CREATE MATERIALIZED VIEW b_v AS SELECT v FROM b")
            assert rows(conn, "SELECT q FROM a_div") == [(3,)]
            conn.execute("INSERT INTO a VALUES (1, 0)")
            assert_division_by_zero(conn, "SELECT q FROM a_div")
            conn.execute("INSERT INTO a VALUES (5, 1)")  # 5 * 10^9 overflows integer
            with pytest.raises(psycopg.errors.NumericValueOutOfRange):
                conn.execute("SELECT m FROM a_big")
            conn.execute("INSERT INTO b VALUES (2)")
            assert rows(conn, "SELECT v FROM b_v ORDER BY v") == [(1,), (2,)]
            conn.execute("DELETE FROM a WHERE y = 0")
            assert rows(conn, "SELECT q FROM a_div ORDER BY q") == [(3,), (5,)]
    finally:
        env.stop()
