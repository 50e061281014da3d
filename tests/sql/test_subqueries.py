"""Subqueries in expressions (sql/subquery.py, sql/decorrelate.py): plans
evaluated by the reference evaluator must give DuckDB's answer to the same
query over the same random tables, NULLs and duplicates included, and fail
exactly when DuckDB fails (a scalar subquery with two rows for one outer row).

The plans must be made of the ordinary operators only (no placeholder may
reach compute), and each query is also checked on hand-picked tables where
the NULL rules of IN / NOT IN / ANY / ALL decide the answer.
"""

from __future__ import annotations

import decimal
from collections import Counter
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.repr import RelationDesc
from coordinator_lib.sql import InMemoryCatalog, SelectPlan, plan_statement
from coordinator_lib.sql.errors import GroupingError, ParseError, UnsupportedFeature
from coordinator_lib.sql.outer import OuterColumn, SubqueryExpr, node_scalars, walk
from tests.sql.reference_eval import EvalError, evaluate, finish

T_DESC = RelationDesc.of(("a", "integer", False), ("b", "integer"), ("c", "text"))
U_DESC = RelationDesc.of(("a", "integer", False), ("x", "integer"), ("y", "text"))
DUCK_TABLES = [
    "CREATE OR REPLACE TABLE t (a INTEGER NOT NULL, b INTEGER, c VARCHAR)",
    "CREATE OR REPLACE TABLE u (a INTEGER NOT NULL, x INTEGER, y VARCHAR)",
]

QUERIES = [
    # scalar, uncorrelated
    "SELECT a, (SELECT max(x) FROM u) AS m FROM t",
    "SELECT a FROM t WHERE b > (SELECT avg(x) FROM u)",
    "SELECT CASE WHEN b > (SELECT avg(x) FROM u) THEN a * 2 ELSE 0 END FROM t",
    "SELECT (SELECT count(*) FROM t), (SELECT min(y) FROM u WHERE x > 1)",
    "SELECT a, (SELECT x FROM u WHERE y = 'a') FROM t",
    # scalar, correlated: non-equality, equality, several columns, in WHERE
    "SELECT a, (SELECT count(*) FROM t AS s WHERE s.b < t.b) FROM t",
    "SELECT a, (SELECT count(*) FROM t AS s WHERE s.b > t.b AND s.a < t.a) FROM t",
    "SELECT a, (SELECT sum(x) FROM u WHERE u.a = t.a) FROM t",
    "SELECT a, (SELECT x FROM u WHERE u.a = t.a) FROM t",
    "SELECT a, (SELECT y FROM u WHERE u.a = t.a AND u.x = t.b) FROM t",
    "SELECT a FROM t WHERE b = (SELECT max(x) FROM u WHERE u.a = t.a)",
    "SELECT a, b FROM t WHERE (SELECT count(*) FROM u WHERE u.x <= t.b) >= 2",
    # EXISTS / NOT EXISTS, in WHERE and as values
    "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a = t.a AND u.x > t.b)",
    "SELECT a, b FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.x = t.b)",
    "SELECT a, EXISTS (SELECT 1 FROM u WHERE u.x < t.b) FROM t",
    "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u) OR b IS NULL",
    # IN / NOT IN (subquery) with NULL semantics
    "SELECT a, b IN (SELECT x FROM u), b NOT IN (SELECT x FROM u) FROM t",
    "SELECT a FROM t WHERE b NOT IN (SELECT x FROM u WHERE u.a <> t.a)",
    "SELECT a FROM t WHERE b + 1 IN (SELECT x FROM u WHERE x IS NOT NULL)",
    "SELECT a, c IN (SELECT y FROM u WHERE u.a = t.a) FROM t",
    "SELECT NULL IN (SELECT x FROM u), 1 IN (SELECT x FROM u), 2 NOT IN (SELECT x FROM u)",
    # quantified comparisons
    "SELECT a, b < ANY (SELECT x FROM u), b >= ALL (SELECT x FROM u) FROM t",
    "SELECT a FROM t WHERE b <> ALL (SELECT x FROM u WHERE u.a = t.a)",
    # nesting: a subquery inside a subquery reading both enclosing levels
    "SELECT a, (SELECT count(*) FROM u WHERE u.x < t.b AND EXISTS "
    "(SELECT 1 FROM t AS t2 WHERE t2.a = u.a AND t2.b > t.b)) FROM t",
    "SELECT a FROM t WHERE b IN (SELECT x FROM u WHERE u.a IN (SELECT s.a FROM t AS s))",
    # grouping: outer references to group keys, subqueries in HAVING and aggregates
    "SELECT b, (SELECT count(*) FROM u WHERE u.x = t.b) FROM t GROUP BY b",
    "SELECT b, count(*) FROM t GROUP BY b "
    "HAVING count(*) > (SELECT count(*) FROM u WHERE u.x = t.b)",
    "SELECT sum((SELECT count(*) FROM u WHERE u.a = t.a)) FROM t",
    "SELECT a, (SELECT max(n) FROM "
    "(SELECT x, count(*) AS n FROM u WHERE u.a <= t.a GROUP BY x) AS g) FROM t",
    "SELECT a, (SELECT count(*) FROM u WHERE u.x = t.b GROUP BY u.a HAVING count(*) > 5) FROM t",
    # set operations inside a correlated subquery
    "SELECT a FROM t WHERE EXISTS "
    "(SELECT x FROM u WHERE u.a = t.a EXCEPT SELECT s.b FROM t AS s WHERE s.a = t.a)",
    "SELECT a, (SELECT count(*) FROM (SELECT x FROM u WHERE u.a < t.a UNION "
    "SELECT b FROM t AS s WHERE s.a > t.a) AS q) FROM t",
    # outer joins inside a correlated subquery
    "SELECT a, (SELECT count(u.x) FROM u LEFT JOIN t AS s ON s.a = u.a AND s.b > t.b) FROM t",
    "SELECT a FROM t WHERE EXISTS "
    "(SELECT 1 FROM u FULL JOIN t AS s ON s.a = u.a WHERE coalesce(u.x, s.b) = t.b)",
    # derived tables, CTEs, ORDER BY, VALUES
    "WITH q AS (SELECT a, (SELECT max(x) FROM u WHERE u.a = t.a) AS m FROM t) "
    "SELECT * FROM q WHERE m IS NOT NULL",
    "SELECT * FROM (SELECT a, b IN (SELECT x FROM u) AS found FROM t) AS s WHERE found",
    "SELECT a, b FROM t ORDER BY (SELECT count(*) FROM u WHERE u.x < t.b), a, b NULLS FIRST",
    "SELECT * FROM (VALUES ((SELECT count(*) FROM u)), (2)) AS v(n)",
    # joins around subqueries
    "SELECT t.a, u.x FROM t JOIN u ON t.a = u.a WHERE u.x > (SELECT min(b) FROM t AS s)",
    "SELECT t.a, u.x FROM t JOIN u ON t.a = u.a AND t.b IN (SELECT x FROM u AS u2)",
]

ints = st.integers(0, 4)
maybe = st.one_of(st.none(), ints)
text = st.one_of(st.none(), st.sampled_from(["a", "b", "ab"]))
t_rows = st.lists(st.tuples(ints, maybe, text), max_size=6)
u_rows = st.lists(st.tuples(ints, maybe, text), max_size=6)


@pytest.fixture(scope="module")
def duck() -> Any:
    con = duckdb.connect()
    yield con
    con.close()


def _catalog() -> tuple[InMemoryCatalog, Any, Any]:
    catalog = InMemoryCatalog()
    return catalog, catalog.add_table("t", T_DESC), catalog.add_table("u", U_DESC)


def _norm(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float | decimal.Decimal):
        number = round(float(value), 6)
        return int(number) if number.is_integer() else number
    return value


def _norm_rows(rows: list[tuple]) -> list[tuple]:
    return [tuple(_norm(v) for v in row) for row in rows]


def _plain(expr: RelationExpr) -> bool:
    """No planner-internal node is left in the plan."""
    for scalar in node_scalars(expr):
        if any(isinstance(n, OuterColumn | SubqueryExpr) for n in walk(scalar)):
            return False
    return all(_plain(child) for child in expr.inputs())


def run_both(duck: Any, sql: str, t: list, u: list) -> None:
    catalog, t_item, u_item = _catalog()
    plan = plan_statement(sql, catalog)
    assert isinstance(plan, SelectPlan)
    assert _plain(plan.expr), sql
    for ddl in DUCK_TABLES:
        duck.execute(ddl)
    if t:
        duck.executemany("INSERT INTO t VALUES (?, ?, ?)", t)
    if u:
        duck.executemany("INSERT INTO u VALUES (?, ?, ?)", u)
    try:
        ours = finish(evaluate(plan.expr, {t_item.id: t, u_item.id: u}), plan.finishing)
        our_error = None
    except EvalError as error:
        ours, our_error = [], error
    try:
        theirs = duck.execute(sql).fetchall()
        their_error = None
    except duckdb.Error as error:
        theirs, their_error = [], error
    assert (our_error is None) == (their_error is None), (sql, our_error, their_error)
    if our_error is not None:
        assert our_error.code == "21000", our_error
        assert "more than one record produced in subquery" in str(our_error)
    if plan.finishing.order_by:
        assert _norm_rows(ours) == _norm_rows(theirs), sql
    else:
        assert Counter(_norm_rows(ours)) == Counter(_norm_rows(theirs)), sql


@pytest.mark.parametrize("sql", QUERIES, ids=[q[:70] for q in QUERIES])
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(t=t_rows, u=u_rows)
def test_subquery_matches_duckdb(duck: Any, sql: str, t: list, u: list) -> None:
    run_both(duck, sql, t, u)


# Tables where NULLs decide IN / NOT IN / ANY / ALL.
FIXED = [
    ([(1, 1, "a"), (2, None, "b"), (3, 3, None)], [(1, 1, "a"), (2, None, None)]),
    ([(1, 1, "a"), (2, 2, "b")], []),
    ([(1, None, None)], [(1, None, None), (1, 2, "a")]),
    ([(1, 1, "a"), (1, 1, "a"), (4, 4, "b")], [(1, 1, "a"), (1, 1, "a"), (4, 2, "b")]),
]


@pytest.mark.parametrize("sql", QUERIES, ids=[q[:70] for q in QUERIES])
def test_subquery_on_null_heavy_tables(duck: Any, sql: str) -> None:
    for t, u in FIXED:
        run_both(duck, sql, t, u)


def test_scalar_subquery_with_two_rows_is_a_cardinality_violation(duck: Any) -> None:
    catalog, t_item, u_item = _catalog()
    plan = plan_statement("SELECT a, (SELECT x FROM u WHERE u.a = t.a) FROM t", catalog)
    assert isinstance(plan, SelectPlan)
    tables = {t_item.id: [(1, 1, "a"), (2, 2, "b")], u_item.id: [(1, 5, None), (2, 6, None)]}
    assert finish(evaluate(plan.expr, tables), plan.finishing) == [(1, 5), (2, 6)]
    tables[u_item.id].append((2, 7, None))
    with pytest.raises(EvalError) as info:
        evaluate(plan.expr, tables)
    assert info.value.code == "21000"
    assert str(info.value) == "more than one record produced in subquery"


def test_global_aggregate_subquery_needs_no_cardinality_check() -> None:
    """A correlated count(*) has one row per outer row by construction: the
    plan has no error row, and no extra Reduce for it."""
    catalog, _, _ = _catalog()
    plan = plan_statement("SELECT (SELECT count(*) FROM u WHERE u.x < t.b) FROM t", catalog)
    assert isinstance(plan, SelectPlan)
    assert "error(" not in repr(plan.expr)
    plan = plan_statement("SELECT (SELECT x FROM u WHERE u.x < t.b) FROM t", catalog)
    assert isinstance(plan, SelectPlan)
    assert "error(" in repr(plan.expr)


def test_correlated_equality_becomes_an_equi_join() -> None:
    """`WHERE u.a = t.a` inside the subquery joins on the key instead of
    filtering a cross product."""
    from coordinator_lib.sql import explain

    catalog, _, _ = _catalog()
    plan = plan_statement("SELECT a, (SELECT sum(x) FROM u WHERE u.a = t.a) FROM t", catalog)
    assert isinstance(plan, SelectPlan)
    text = explain(plan.expr)
    assert "CrossJoin" not in text, text


@pytest.mark.parametrize(
    ("sql", "error", "words"),
    [
        ("SELECT (SELECT a, x FROM u) FROM t", ParseError, "return 1 column, got 2"),
        ("SELECT a FROM t WHERE a IN (SELECT a, x FROM u)", ParseError, "2 columns available"),
        (
            "SELECT (SELECT sum(t.a) FROM u) FROM t",
            UnsupportedFeature,
            "exclusively to outer columns",
        ),
        (
            "SELECT a, (SELECT count(*) FROM u WHERE u.x = t.b) FROM t GROUP BY a",
            GroupingError,
            "GROUP BY",
        ),
        ("SELECT a FROM t WHERE a = ANY (b)", UnsupportedFeature, "subquery"),
    ],
)
def test_subquery_errors(sql: str, error: type, words: str) -> None:
    catalog, _, _ = _catalog()
    with pytest.raises(error, match=words):
        plan_statement(sql, catalog)


def test_subquery_names_resolve_innermost_first() -> None:
    """An unqualified name the subquery has is the subquery's own column,
    even when the enclosing query has one of that name too."""
    catalog, t_item, u_item = _catalog()
    plan = plan_statement("SELECT a, (SELECT max(a) FROM u) FROM t", catalog)
    assert isinstance(plan, SelectPlan)
    tables = {t_item.id: [(1, None, None), (2, None, None)], u_item.id: [(7, None, None)]}
    assert sorted(finish(evaluate(plan.expr, tables), plan.finishing)) == [(1, 7), (2, 7)]


DML = [
    "DELETE FROM t WHERE b IN (SELECT x FROM u)",
    "DELETE FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.a = t.a)",
    "UPDATE t SET b = (SELECT max(x) FROM u WHERE u.a = t.a) WHERE c IS NOT NULL",
    "UPDATE t SET c = 'z' WHERE b > (SELECT avg(x) FROM u)",
]


@pytest.mark.parametrize("sql", DML)
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(t=t_rows, u=u_rows)
def test_dml_with_subqueries_matches_duckdb(duck: Any, sql: str, t: list, u: list) -> None:
    """DELETE / UPDATE whose WHERE or SET holds a subquery leave the table
    as DuckDB's same statement does."""
    from coordinator_lib.sql import DeletePlan, UpdatePlan

    catalog, t_item, u_item = _catalog()
    plan = plan_statement(sql, catalog)
    assert isinstance(plan, DeletePlan | UpdatePlan)
    tables = {t_item.id: t, u_item.id: u}
    after = Counter(t) - evaluate(plan.retract, tables)
    if isinstance(plan, UpdatePlan):
        after += evaluate(plan.insert, tables)
    for ddl in DUCK_TABLES:
        duck.execute(ddl)
    if t:
        duck.executemany("INSERT INTO t VALUES (?, ?, ?)", t)
    if u:
        duck.executemany("INSERT INTO u VALUES (?, ?, ?)", u)
    duck.execute(sql)
    assert after == Counter(duck.execute("SELECT * FROM t").fetchall()), sql
