"""LEFT / RIGHT / FULL OUTER, CROSS, NATURAL, non-equi and self joins
(sql/joins.py): plans evaluated by the reference evaluator give DuckDB's
answer over the same random tables (NULLs and duplicate rows included), and
the padded side's columns are nullable in the plan's desc.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_lib.expr.relation import Join, RelationExpr
from coordinator_lib.repr import RelationDesc
from coordinator_lib.sql import InMemoryCatalog, SelectPlan, plan_statement
from coordinator_lib.sql.errors import ParseError, UnsupportedFeature
from tests.sql.reference_eval import evaluate, finish

T_DESC = RelationDesc.of(("a", "integer", False), ("b", "integer"), ("c", "text"))
U_DESC = RelationDesc.of(("a", "integer", False), ("x", "integer"), ("y", "text"))
DUCK_TABLES = [
    "CREATE OR REPLACE TABLE t (a INTEGER NOT NULL, b INTEGER, c VARCHAR)",
    "CREATE OR REPLACE TABLE u (a INTEGER NOT NULL, x INTEGER, y VARCHAR)",
]

QUERIES = [
    "SELECT * FROM t LEFT JOIN u ON t.a = u.a",
    "SELECT * FROM t LEFT OUTER JOIN u ON t.b = u.x AND u.y IS NOT NULL",
    "SELECT * FROM t RIGHT JOIN u ON t.a = u.a",
    "SELECT * FROM t FULL JOIN u ON t.a = u.a AND u.x > t.b",
    "SELECT * FROM t FULL OUTER JOIN u ON t.c = u.y",
    # non-equi and constant conditions
    "SELECT * FROM t LEFT JOIN u ON t.b < u.x",
    "SELECT * FROM t RIGHT JOIN u ON t.b <> u.x OR u.y = t.c",
    "SELECT * FROM t LEFT JOIN u ON true",
    "SELECT * FROM t FULL JOIN u ON false",
    "SELECT * FROM t LEFT JOIN u ON t.b IS NOT DISTINCT FROM u.x",
    # USING / NATURAL with the merged column
    "SELECT * FROM t LEFT JOIN u USING (a)",
    "SELECT * FROM t RIGHT JOIN u USING (a)",
    "SELECT * FROM t FULL JOIN u USING (a)",
    "SELECT a, t.a AS ta, u.a AS ua FROM t FULL JOIN u USING (a)",
    "SELECT * FROM t NATURAL JOIN u",
    "SELECT * FROM t NATURAL LEFT JOIN u",
    # cross and self joins
    "SELECT * FROM t CROSS JOIN u",
    "SELECT t1.a, t2.b FROM t AS t1 CROSS JOIN t AS t2 WHERE t1.b < t2.b",
    "SELECT t1.a, t2.a AS a2 FROM t AS t1 LEFT JOIN t AS t2 ON t1.b = t2.a AND t1.a <> t2.a",
    # chains, WHERE above, aggregates over outer joins
    "SELECT t.a, u.x, s.b FROM t LEFT JOIN u ON t.a = u.a LEFT JOIN t AS s ON s.b = u.x",
    "SELECT t.a, u.x, s.c FROM t JOIN u ON t.a = u.a RIGHT JOIN t AS s ON s.a = u.x",
    "SELECT * FROM t LEFT JOIN u ON t.a = u.a WHERE u.x IS NULL",
    "SELECT t.a, count(u.x), count(*), sum(u.x) FROM t LEFT JOIN u ON t.a = u.a GROUP BY t.a",
    "SELECT DISTINCT t.b, u.y FROM t FULL JOIN u ON t.b = u.x",
    # parenthesized joins
    "SELECT * FROM t LEFT JOIN (u JOIN t AS s ON u.a = s.a) ON t.b = u.x",
    "SELECT t.a, u.x, s.b FROM (t LEFT JOIN u ON t.a = u.a) FULL JOIN t AS s ON s.b = u.x",
    "SELECT * FROM ((t JOIN u USING (a)) LEFT JOIN t AS s ON s.a = u.x)",
    # subqueries in ON and around outer joins
    "SELECT * FROM t LEFT JOIN u ON t.a = u.a AND u.x IN (SELECT b FROM t AS s)",
    "SELECT t.a, (SELECT count(*) FROM u WHERE u.x = t.b) FROM t LEFT JOIN u AS v ON v.a = t.a",
    "SELECT * FROM (SELECT a, max(b) AS m FROM t GROUP BY a) AS g LEFT JOIN u ON g.m = u.x",
]

ints = st.integers(0, 4)
maybe = st.one_of(st.none(), ints)
text = st.one_of(st.none(), st.sampled_from(["a", "b"]))
rows = st.lists(st.tuples(ints, maybe, text), max_size=6)


@pytest.fixture(scope="module")
def duck() -> Any:
    con = duckdb.connect()
    yield con
    con.close()


def _catalog() -> tuple[InMemoryCatalog, Any, Any]:
    catalog = InMemoryCatalog()
    return catalog, catalog.add_table("t", T_DESC), catalog.add_table("u", U_DESC)


def run_both(duck: Any, sql: str, t: list, u: list) -> None:
    catalog, t_item, u_item = _catalog()
    plan = plan_statement(sql, catalog)
    assert isinstance(plan, SelectPlan)
    for ddl in DUCK_TABLES:
        duck.execute(ddl)
    if t:
        duck.executemany("INSERT INTO t VALUES (?, ?, ?)", t)
    if u:
        duck.executemany("INSERT INTO u VALUES (?, ?, ?)", u)
    ours = finish(evaluate(plan.expr, {t_item.id: t, u_item.id: u}), plan.finishing)
    theirs = duck.execute(sql).fetchall()
    assert Counter(ours) == Counter(theirs), sql
    types = plan.desc.types
    for row in ours:  # every NULL the plan produces is in a nullable column
        for value, ctype in zip(row, types, strict=True):
            assert value is not None or ctype.nullable, (sql, row, types)


@pytest.mark.parametrize("sql", QUERIES, ids=[q[:70] for q in QUERIES])
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(t=rows, u=rows)
def test_join_matches_duckdb(duck: Any, sql: str, t: list, u: list) -> None:
    run_both(duck, sql, t, u)


def test_duplicates_and_null_keys(duck: Any) -> None:
    """A duplicated row keeps its multiplicity matched or not; a NULL key
    never matches but is kept (and padded) by the outer side."""
    t = [(1, 1, "a"), (1, 1, "a"), (2, None, None), (3, 3, "b")]
    u = [(1, 1, "a"), (1, 1, "a"), (4, None, None), (3, None, "b")]
    for sql in QUERIES:
        run_both(duck, sql, t, u)


def test_padded_side_is_nullable() -> None:
    catalog, _, _ = _catalog()
    plan = plan_statement("SELECT t.a, u.a FROM t LEFT JOIN u ON t.a = u.a", catalog)
    assert isinstance(plan, SelectPlan)
    assert [c.nullable for c in plan.desc.types] == [False, True]
    plan = plan_statement("SELECT t.a, u.a FROM t RIGHT JOIN u ON t.a = u.a", catalog)
    assert isinstance(plan, SelectPlan)
    assert [c.nullable for c in plan.desc.types] == [True, False]
    plan = plan_statement("SELECT a FROM t RIGHT JOIN u USING (a)", catalog)
    assert isinstance(plan, SelectPlan)
    assert [c.nullable for c in plan.desc.types] == [False]


def test_left_join_on_keys_is_built_from_equi_joins() -> None:
    """The inner part and the anti-join on the match keys are equi-joins
    (incremental), not filtered cross products."""
    catalog, _, _ = _catalog()
    plan = plan_statement("SELECT * FROM t LEFT JOIN u ON t.a = u.a", catalog)
    assert isinstance(plan, SelectPlan)

    def joins(expr: RelationExpr) -> list[Join]:
        found = [expr] if isinstance(expr, Join) else []
        return found + [j for child in expr.inputs() for j in joins(child)]

    assert joins(plan.expr) and all(j.equivalences for j in joins(plan.expr))


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("SELECT * FROM t LEFT JOIN u", ParseError),
        ("SELECT * FROM t SEMI JOIN u ON t.a = u.a", UnsupportedFeature),
    ],
)
def test_join_errors(sql: str, error: type) -> None:
    catalog, _, _ = _catalog()
    with pytest.raises(error):
        plan_statement(sql, catalog)
