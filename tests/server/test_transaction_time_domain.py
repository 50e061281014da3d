"""A read transaction holds its whole time domain at its first read (issue
18), as Materialize does: every stored collection in the schemas of what
the first SELECT reads is held at the transaction's time until COMMIT or
ROLLBACK. So a later SELECT in the same BEGIN ... COMMIT of another table
of that schema reads at the same time, however far compaction (running all
along, with 1 ms of history) has moved that table's since meanwhile; it
was refused with 72000 (snapshot_too_old) when only the first read's inputs
were held."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import fast_config

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def environment(tmp_path: Path) -> Iterator[Environment]:
    env = Environment(
        fast_config(tmp_path / "env", default_retain_history_ms=1, compaction_interval_ms=50),
        pgwire_port=0,
        http_port=0,
    )
    env.start()
    try:
        yield env
    finally:
        env.stop()


def _connect(env: Environment) -> psycopg.Connection[Any]:
    return psycopg.connect(
        f"host=127.0.0.1 port={env.pgwire.port} user=materialize dbname=materialize "
        "connect_timeout=10",
        autocommit=True,
    )


@pytest.mark.parametrize("isolation", ["strict serializable", "serializable"])
def test_a_transaction_reads_every_table_of_its_schema_at_its_first_time(
    environment: Environment, isolation: str
) -> None:
    coord = environment.handle.coordinator
    with _connect(environment) as conn, _connect(environment) as writer:
        conn.execute(f"SET transaction_isolation = '{isolation}'")
        conn.execute("CREATE TABLE t1 (x int)")
        conn.execute("CREATE TABLE t2 (y int)")
        conn.execute("CREATE SCHEMA elsewhere")
        conn.execute("CREATE TABLE elsewhere.r (z int)")
        conn.execute("INSERT INTO t1 VALUES (1)")
        conn.execute("INSERT INTO t2 VALUES (2)")
        catalog = coord.catalog.session_catalog("materialize", ("public",))
        t2 = catalog.resolve(("t2",)).id
        r = catalog.resolve(("elsewhere", "r")).id

        conn.execute("BEGIN")
        assert conn.execute("SELECT x FROM t1").fetchall() == [(1,)]
        writer.execute("INSERT INTO t2 VALUES (3)")
        written = coord.storage.collection_frontiers(t2)[1].time
        assert written is not None
        # Compaction moves every unheld since past the insert: r's (outside
        # the transaction's schema, same read policy) shows when.
        deadline = time.monotonic() + 60
        while (coord.storage.collection_frontiers(r)[0].time or 0) <= written:
            assert time.monotonic() < deadline, "compaction did not run"
            time.sleep(0.05)
        # Read at the transaction's time: t2 as it was, without the insert.
        assert conn.execute("SELECT y FROM t2").fetchall() == [(2,)]
        assert conn.execute("SELECT x FROM t1").fetchall() == [(1,)]
        conn.execute("COMMIT")

        # After COMMIT the holds are gone: t2 compacts and reads are fresh.
        assert sorted(conn.execute("SELECT y FROM t2").fetchall()) == [(2,), (3,)]
        deadline = time.monotonic() + 60
        while (coord.storage.collection_frontiers(t2)[0].time or 0) <= written:
            assert time.monotonic() < deadline, "t2 stayed held after COMMIT"
            time.sleep(0.05)


def test_a_read_outside_the_time_domain_is_refused_as_materialize_does(
    environment: Environment,
) -> None:
    """After the first read (of `public`), a read of another schema's table,
    or of a table created since, is refused with Materialize's same-timedomain
    error (25000) naming what is outside and what is available, every time:
    it was read at the transaction's time if that was still there, else 72000,
    depending on how far compaction had got. The transaction then ends as
    usual, and reads inside the domain keep answering in it."""
    with _connect(environment) as conn:
        conn.execute("CREATE TABLE t1 (x int)")
        conn.execute("CREATE SCHEMA elsewhere")
        conn.execute("CREATE TABLE elsewhere.r (z int)")
        conn.execute("INSERT INTO t1 VALUES (1)")
        conn.execute("INSERT INTO elsewhere.r VALUES (2)")

        conn.execute("BEGIN")
        assert conn.execute("SELECT x FROM t1").fetchall() == [(1,)]
        with pytest.raises(psycopg.errors.InvalidTransactionState) as raised:
            conn.execute("SELECT z FROM elsewhere.r")
        error = raised.value
        assert error.sqlstate == "25000"
        assert error.diag.message_primary == (
            "Transactions can only reference objects in the same timedomain. "
            "See https://materialize.com/docs/sql/begin/#same-timedomain-error"
        )
        assert error.diag.message_detail == (
            "The following relations in the query are outside the transaction's time domain:\n"
            '"materialize"."elsewhere"."r"\n'
            "Only the following relations are available:\n"
            '"materialize"."public"."t1"'
        )
        conn.execute("ROLLBACK")

        conn.execute("BEGIN")
        assert conn.execute("SELECT x FROM t1").fetchall() == [(1,)]
        with _connect(environment) as other:
            other.execute("CREATE TABLE t_new (y int)")
        with pytest.raises(psycopg.errors.InvalidTransactionState):
            conn.execute("SELECT y FROM t_new")
        conn.execute("ROLLBACK")
        assert conn.execute("SELECT z FROM elsewhere.r").fetchall() == [(2,)]
