"""A SUBSCRIBE shows its view's errors (issue 18), as Materialize's does: a
SUBSCRIBE to a view whose error collection becomes non-empty ends with that
error, its original SQLSTATE, as a SELECT at that time answers; one started
while the error is there fails at once; a SUBSCRIBE to another view goes on.
Over pgwire with psycopg, in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.fixtures.served import connect, served

pytestmark = pytest.mark.timeout(120)


def fetch(conn: psycopg.Connection[Any], timeout: str = "1s") -> list[tuple[Any, ...]]:
    """What cursor `c` has within `timeout`, without mz_timestamp."""
    return [row[1:] for row in conn.execute(f"FETCH ALL c WITH (timeout = '{timeout}')")]


def subscribe(conn: psycopg.Connection[Any], query: str) -> None:
    conn.execute("BEGIN")
    conn.execute(f"DECLARE c CURSOR FOR SUBSCRIBE {query}")


def assert_division_by_zero(raised: pytest.ExceptionInfo[psycopg.Error]) -> None:
    assert raised.value.sqlstate == "22012"
    assert raised.value.diag.message_primary == "division by zero"


@pytest.mark.parametrize("kind", ["VIEW", "MATERIALIZED VIEW"])
def test_a_subscribe_ends_with_its_views_error(tmp_path: Path, kind: str) -> None:
    """A view is subscribed through a transient dataflow of its own, a
    materialized view by listening to its collection: both end with the
    error. Before, the SUBSCRIBE went on as if the row were not there."""
    with (
        served(tmp_path / "env") as env,
        connect(env) as conn,
        connect(env) as failing,
        connect(env) as other,
        connect(env) as late,
    ):
        conn.execute("CREATE TABLE a (x int, y int)")
        conn.execute("CREATE TABLE b (v int)")
        conn.execute("INSERT INTO a VALUES (6, 2)")
        conn.execute(f"CREATE {kind} a_div AS SELECT x / y AS q FROM a")
        conn.execute(f"CREATE {kind} b_v AS SELECT v + 1 AS w FROM b")
        subscribe(failing, "a_div")
        subscribe(other, "b_v")
        assert fetch(failing) == [(1, 3)]

        conn.execute("INSERT INTO a VALUES (1, 0)")
        with pytest.raises(psycopg.errors.DivisionByZero) as raised:
            for _ in range(30):  # bounded: each FETCH returns within its timeout
                assert fetch(failing) == []
        assert_division_by_zero(raised)
        failing.execute("ROLLBACK")

        # The other view's SUBSCRIBE goes on.
        conn.execute("INSERT INTO b VALUES (1)")
        seen: list[tuple[Any, ...]] = []
        for _ in range(30):
            seen += fetch(other)
            if seen:
                break
        assert seen == [(1, 2)]

        # Started while the error is there: it fails at once (a FETCH that
        # would wait 30 s for rows gets the error instead), as a plain
        # SUBSCRIBE does.
        subscribe(late, "a_div")
        with pytest.raises(psycopg.errors.DivisionByZero) as raised:
            fetch(late, "30s")
        assert_division_by_zero(raised)
        late.execute("ROLLBACK")
        late.execute("SET statement_timeout = '30s'")
        with pytest.raises(psycopg.errors.DivisionByZero) as raised:
            late.execute("SUBSCRIBE a_div")
        assert_division_by_zero(raised)

        # Deleting the row retracts the error: a new SUBSCRIBE answers.
        conn.execute("DELETE FROM a WHERE y = 0")
        subscribe(late, "a_div")
        assert fetch(late, "30s") == [(1, 3)]
        late.execute("ROLLBACK")
