"""INSERTs of constants take a short path (no substitution passes, no
dataflow for the VALUES, a text seen once parsed without a copy): they must
land exactly as the long path lands them, and anything that is not a
constant must still take the long path."""

from __future__ import annotations

from typing import Any

from coordinator_lib.server.environment import Environment
from tests.fixtures.served import connect


def test_constant_rows_land_as_written_and_calls_still_evaluate(
    environment: Environment,
) -> None:
    with connect(environment) as conn:
        conn.execute("CREATE TABLE t (id bigint, n integer, v text, b boolean)")
        statements = [
            "INSERT INTO t VALUES (1, -7, 'a', true), (1, -7, 'a', true)",
            "INSERT INTO t (id, v) VALUES (2, NULL)",
            "INSERT INTO t VALUES (3, 2 + 1, upper('x'), NOT false)",
            "INSERT INTO t (id, v) VALUES (4, current_user)",
        ]
        for statement in statements * 3:  # first seen, then from the parse cache
            conn.execute(statement)
        rows: list[Any] = conn.execute("SELECT * FROM t ORDER BY id, v").fetchall()
    assert rows == (
        [(1, -7, "a", True)] * 6
        + [(2, None, None, None)] * 3
        + [(3, 3, "X", True)] * 3
        + [(4, None, "materialize", None)] * 3
    )
