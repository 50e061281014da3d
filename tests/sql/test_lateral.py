"""LATERAL subqueries in FROM (sql/lateral.py): plans evaluated by the
reference evaluator give DuckDB's answer to the same query over random
tables (NULLs and duplicates included), are made of ordinary operators
only, and a correlated `ORDER BY ... LIMIT` is one TopK keyed by the
correlation values (top k per group), not a recompute of all of it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from coordinator_lib.expr.relation import Distinct, FlatMap, Get, Join, RelationExpr, TopK
from coordinator_lib.sql import SelectPlan, plan_statement
from coordinator_lib.sql.errors import InvalidColumnReference, SqlError
from tests.sql.reference_eval import evaluate, finish
from tests.sql.test_subqueries import FIXED, _catalog, duck, run_both, t_rows, u_rows

__all__ = ["duck"]  # the fixture, imported for the tests below

LATERAL = [
    # top k per group: the idiom LATERAL exists for
    "SELECT t.a, s.x FROM t, LATERAL "
    "(SELECT x FROM u WHERE u.a = t.a ORDER BY x DESC NULLS LAST LIMIT 2) AS s",
    "SELECT t.a, t.b, s.x, s.y FROM t CROSS JOIN LATERAL "
    "(SELECT x, y FROM u WHERE u.a = t.a ORDER BY x NULLS FIRST, y NULLS FIRST LIMIT 1) AS s",
    "SELECT t.a, s.x FROM t LEFT JOIN LATERAL "
    "(SELECT x FROM u WHERE u.a = t.a ORDER BY x NULLS LAST LIMIT 1) AS s ON true",
    # JOIN LATERAL ... ON: true, and a condition on both sides
    "SELECT t.a, s.n FROM t JOIN LATERAL "
    "(SELECT count(*) AS n FROM u WHERE u.x < t.b) AS s ON true",
    "SELECT t.a, s.x FROM t JOIN LATERAL (SELECT x FROM u WHERE u.a = t.a) AS s ON s.x > t.b",
    "SELECT t.a, t.b, s.x FROM t LEFT JOIN LATERAL "
    "(SELECT x FROM u WHERE u.a = t.a) AS s ON s.x > t.b",
    "SELECT t.a, s.x FROM t LEFT JOIN LATERAL (SELECT x FROM u WHERE u.x = t.b) AS s ON true",
    # aggregates per outer row, several correlation columns, expressions
    "SELECT t.a, s.total, s.n FROM t, LATERAL "
    "(SELECT sum(x) AS total, count(*) AS n FROM u WHERE u.a = t.a AND u.y = t.c) AS s",
    "SELECT t.a, s.m FROM t, LATERAL (SELECT t.b + x AS m FROM u WHERE u.a <= t.a) AS s",
    "SELECT t.a, s.y, s.n FROM t, LATERAL "
    "(SELECT y, count(*) AS n FROM u WHERE u.x <> t.b GROUP BY y) AS s",
    # column aliases, a derived table to the left, two laterals, one reading the other
    "SELECT q.a, s.v FROM (SELECT DISTINCT a FROM t) AS q, LATERAL "
    "(SELECT x FROM u WHERE u.a = q.a ORDER BY x NULLS LAST LIMIT 1) AS s(v)",
    "SELECT t.a, s.x, r.b FROM t, LATERAL (SELECT x FROM u WHERE u.a = t.a) AS s, "
    "LATERAL (SELECT b FROM t AS t2 WHERE t2.b = s.x) AS r",
    # uncorrelated LATERAL is a plain subquery; LATERAL first in FROM too
    "SELECT t.a, s.m FROM t, LATERAL (SELECT max(x) AS m FROM u) AS s",
    "SELECT s.x FROM LATERAL (SELECT x FROM u WHERE x > 1) AS s",
    # a LATERAL inside a correlated subquery (reads both enclosing levels)
    "SELECT a, (SELECT count(*) FROM u, LATERAL "
    "(SELECT b FROM t AS t2 WHERE t2.a = u.a AND t2.b < t.b) AS s) AS n FROM t",
    # joins after a lateral, and its columns in WHERE / GROUP BY
    "SELECT t.a, s.x, u2.y FROM t, LATERAL (SELECT x FROM u WHERE u.a = t.a) AS s "
    "JOIN u AS u2 ON u2.x = s.x WHERE s.x > 0",
    "SELECT s.x, count(*) FROM t, LATERAL "
    "(SELECT x FROM u WHERE u.a = t.a ORDER BY x NULLS LAST LIMIT 2) AS s GROUP BY s.x",
]


@pytest.mark.parametrize("sql", LATERAL, ids=[q[:80] for q in LATERAL])
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(t=t_rows, u=u_rows)
def test_lateral_matches_duckdb(duck: Any, sql: str, t: list, u: list) -> None:
    run_both(duck, sql, t, u)


@pytest.mark.parametrize("sql", LATERAL, ids=[q[:80] for q in LATERAL])
def test_lateral_on_null_heavy_tables(duck: Any, sql: str) -> None:
    for t, u in FIXED:
        run_both(duck, sql, t, u)


def _topks(expr: RelationExpr) -> list[TopK]:
    found = [expr] if isinstance(expr, TopK) else []
    return found + [n for child in expr.inputs() for n in _topks(child)]


def test_top_k_per_group_is_one_keyed_topk() -> None:
    """The correlation value joins the TopK's group key, so a change to one
    group recomputes that group only (EXPLAIN: touched keys)."""
    catalog, t_item, u_item = _catalog()
    plan = plan_statement(
        "SELECT t.a, s.x FROM t, LATERAL (SELECT x FROM u WHERE u.a = t.a "
        "ORDER BY x DESC LIMIT 2) AS s",
        catalog,
    )
    assert isinstance(plan, SelectPlan)
    (topk,) = _topks(plan.expr)
    assert len(topk.group_key) == 1 and topk.limit == 2
    tables = {
        t_item.id: [(1, None, None), (2, None, None), (1, None, None)],
        u_item.id: [(1, 5, None), (1, 7, None), (1, 6, None), (2, 1, None), (3, 9, None)],
    }
    got = sorted(finish(evaluate(plan.expr, tables), plan.finishing))
    assert got == [(1, 6), (1, 6), (1, 7), (1, 7), (2, 1)]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT t.a, g FROM t, LATERAL generate_series(1, t.a) AS g",
        "SELECT t.a, r.* FROM t, ROWS FROM (generate_series(1, t.a), unnest(ARRAY[t.b])) AS r",
        "SELECT t.a, x, y FROM t, unnest(ARRAY[t.a], ARRAY[t.b, 1]) AS u(x, y)",
        "SELECT a, generate_series(1, a) AS g, unnest(ARRAY[b, a]) AS h FROM t",
    ],
)
def test_table_function_runs_on_the_left_rows(sql: str) -> None:
    """A lateral table function call (several zipped: one FlatMap) runs on
    the left rows themselves: no distinct correlation values joined back,
    so a view maintains it as linear (sql/lateral.py, _row_local)."""
    catalog, _, _ = _catalog()
    plan = plan_statement(sql, catalog)
    assert isinstance(plan, SelectPlan)
    nodes = list(_walk(plan.expr))
    assert not [n for n in nodes if isinstance(n, Join | Distinct)]
    (flat,) = [n for n in nodes if isinstance(n, FlatMap)]
    assert [type(n) for n in _walk(flat) if not n.inputs()] == [Get]


def _walk(expr: RelationExpr) -> list[RelationExpr]:
    return [expr, *(n for child in expr.inputs() for n in _walk(child))]


def test_lateral_columns_and_names() -> None:
    catalog, _, _ = _catalog()
    plan = plan_statement(
        "SELECT * FROM t JOIN LATERAL (SELECT x AS v, y FROM u WHERE u.a = t.a) AS s(w) ON true",
        catalog,
    )
    assert isinstance(plan, SelectPlan)
    assert list(plan.desc.names) == ["a", "b", "c", "w", "y"]


@pytest.mark.parametrize(
    ("sql", "error", "words", "position"),
    [
        (
            "SELECT * FROM t RIGHT JOIN LATERAL (SELECT x FROM u WHERE u.a = t.a) AS s ON true",
            InvalidColumnReference,
            'entry for table "t"',
            65,
        ),
        (
            "SELECT * FROM t FULL JOIN LATERAL (SELECT x FROM u WHERE u.a = t.a) AS s ON true",
            InvalidColumnReference,
            'entry for table "t"',
            64,
        ),
        # without LATERAL a subquery cannot see the items to its left
        (
            "SELECT * FROM t, (SELECT x FROM u WHERE u.a = t.a) AS s",
            SqlError,
            "t",
            None,
        ),
    ],
)
def test_lateral_errors(sql: str, error: type, words: str, position: int | None) -> None:
    catalog, _, _ = _catalog()
    with pytest.raises(error, match=words) as info:
        plan_statement(sql, catalog)
    if position is not None:
        assert info.value.position == position
        assert info.value.code == "42P10"
        assert "INNER or LEFT" in (info.value.detail or "")
