"""EXPLAIN with Materialize's output modifiers over pgwire (issue 19):
`EXPLAIN WITH (arity, types) SELECT ...` and `EXPLAIN OPTIMIZED PLAN WITH
(...) FOR ...` parse; `arity` and `types` end each operator's line with
`// { ... }`; any other modifier is 0A000 naming it, at its position."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.fixtures.served import connect, served

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[psycopg.Connection[Any]]:
    path: Path = tmp_path_factory.mktemp("explain_options") / "env"
    with served(path) as env, connect(env) as conn:
        conn.execute("CREATE TABLE t (a int NOT NULL, b text)")
        conn.execute("CREATE VIEW v AS SELECT a FROM t WHERE a > 1")
        yield conn


def _plan(conn: psycopg.Connection[Any], sql: str) -> list[str]:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return str(row[0]).splitlines()


def test_arity_and_types_annotate_each_operator(conn: psycopg.Connection[Any]) -> None:
    lines = _plan(conn, "EXPLAIN OPTIMIZED PLAN WITH (arity, types) FOR SELECT a, b FROM t")
    assert lines == ['Get materialize.public.t [source] // { arity: 2, types: "(integer, text?)" }']
    assert _plan(conn, "EXPLAIN WITH (arity) SELECT a FROM t WHERE a > 1") == [
        "Project (#0) [incremental] // { arity: 1 }",
        "  Filter (#0 > 1) [incremental] // { arity: 2 }",
        "    Get materialize.public.t [source] // { arity: 2 }",
    ]
    # an existing view, Materialize's AS TEXT, and a modifier switched off
    assert _plan(conn, "EXPLAIN OPTIMIZED PLAN WITH (types, arity = false) AS TEXT FOR VIEW v")[
        0
    ].endswith('// { types: "(integer)" }')
    # WITH without a parenthesis is still the statement's CTE
    assert _plan(conn, "EXPLAIN WITH c AS (SELECT 1) SELECT * FROM c")[0].startswith("Map (1)")


@pytest.mark.parametrize(
    ("sql", "option"),
    [
        ("EXPLAIN WITH (arity, join implementations) SELECT a FROM t", "join implementations"),
        ("EXPLAIN OPTIMIZED PLAN WITH (keys) FOR SELECT a FROM t", "keys"),
        ("EXPLAIN PHYSICAL PLAN WITH (arity) FOR SELECT a FROM t", "arity"),
    ],
)
def test_other_modifiers_are_refused_by_name(
    conn: psycopg.Connection[Any], sql: str, option: str
) -> None:
    with pytest.raises(psycopg.Error) as raised:
        conn.execute(sql)
    assert raised.value.sqlstate == "0A000"
    assert f'EXPLAIN option "{option}" is not supported' in str(raised.value)
    assert raised.value.diag.statement_position == str(sql.index(option) + 1)
