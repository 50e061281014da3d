"""Plans evaluated by the reference evaluator must give what DuckDB gives for
the same query over the same random tables.

This catches semantic bugs in planning (wrong join equivalences, lost rows
in global aggregates, wrong NULL handling, ...) before any renderer exists.
Where PostgreSQL and DuckDB disagree the DuckDB text is adjusted (second
element of a QUERIES entry). Differences found:

- `/` on integers: PostgreSQL truncates (7/2 = 3), DuckDB returns a double;
  DuckDB's `//` truncates toward zero like PostgreSQL's `/`.
- division by zero: PostgreSQL raises an error, DuckDB returns NULL; the
  queries divide by values that cannot be zero.
- avg(integer): numeric in PostgreSQL, double in DuckDB; sum(integer):
  bigint in PostgreSQL, int128 in DuckDB; values are compared as numbers
  (floats rounded to 6 places).
- ORDER BY ... DESC: PostgreSQL puts NULLs first, DuckDB last; the queries
  spell NULLS FIRST/LAST out.
- text ordering depends on collation in both; ordered queries sort text
  only where ties cannot change the compared result.
"""

from __future__ import annotations

import decimal
from collections import Counter
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_lib.repr import RelationDesc
from coordinator_lib.sql import InMemoryCatalog, SelectPlan, plan_statement
from tests.sql.reference_eval import EvalError, evaluate, finish

T_DESC = RelationDesc.of(("a", "integer", False), ("b", "integer"), ("c", "text"), ("d", "bigint"))
U_DESC = RelationDesc.of(("a", "integer", False), ("x", "integer"), ("y", "text"))

# (PostgreSQL text for our planner, DuckDB text when it must differ)
QUERIES: list[tuple[str, str | None]] = [
    ("SELECT a, b FROM t WHERE b > 2", None),
    ("SELECT a + b, a - b, a * b, -a FROM t", None),
    (
        "SELECT a / 3, a % 3, b / (abs(a) + 1), b % (abs(a) + 1) FROM t",
        "SELECT a // 3, a % 3, b // (abs(a) + 1), b % (abs(a) + 1) FROM t",
    ),
    ("SELECT a, count(*), sum(b), min(c), max(b), count(c) FROM t GROUP BY a", None),
    ("SELECT count(*), sum(b), min(b), max(b), count(b) FROM t", None),
    ("SELECT avg(b), avg(d), sum(d) FROM t", None),
    ("SELECT a, avg(b) FROM t GROUP BY a", None),
    ("SELECT count(DISTINCT b), count(b), sum(DISTINCT b) FROM t", None),
    ("SELECT t.a, u.x FROM t JOIN u ON t.a = u.a", None),
    ("SELECT t.a, t.b, u.x FROM t, u WHERE t.a = u.a AND t.b < u.x", None),
    ("SELECT * FROM t JOIN u USING (a)", None),
    ("SELECT t.c, u.y FROM t JOIN u ON t.c = u.y AND t.b = u.x", None),
    ("SELECT t1.a, t2.b, u.y FROM t AS t1 JOIN t AS t2 ON t1.b = t2.a JOIN u ON u.a = t2.a", None),
    ("SELECT DISTINCT b FROM t", None),
    ("SELECT a FROM t UNION SELECT a FROM u", None),
    ("SELECT a, c FROM t UNION ALL SELECT x, y FROM u", None),
    ("SELECT a FROM t EXCEPT SELECT a FROM u", None),
    ("SELECT a FROM t EXCEPT ALL SELECT a FROM u", None),
    ("SELECT a FROM t INTERSECT SELECT a FROM u", None),
    ("SELECT a FROM t INTERSECT ALL SELECT a FROM u", None),
    ("SELECT b, count(*) FROM t GROUP BY b HAVING count(*) > 1", None),
    (
        "SELECT CASE WHEN b IS NULL THEN 'none' WHEN b > 2 THEN 'big' ELSE 'small' END, "
        "coalesce(b, -1), nullif(a, 1), CASE a WHEN 1 THEN 10 WHEN 2 THEN 20 END FROM t",
        None,
    ),
    ("SELECT a FROM t WHERE b BETWEEN 1 AND 3 OR c IN ('x', 'y')", None),
    ("SELECT c || 'z', lower(c), upper(c), length(c), c || a FROM t", None),
    ("SELECT a, c FROM t WHERE c LIKE 'a%' AND NOT (b IS NULL)", None),
    (
        "SELECT a, b FROM t ORDER BY a DESC, b NULLS FIRST, d NULLS LAST, c NULLS LAST "
        "LIMIT 3 OFFSET 1",
        None,
    ),
    ("SELECT b + 1 AS z, count(*) FROM t GROUP BY b + 1", None),
    (
        "WITH q AS (SELECT a, sum(b) AS s FROM t GROUP BY a) "
        "SELECT q.a, q.s, u.x FROM q JOIN u ON q.a = u.a",
        None,
    ),
    ("SELECT abs(b - a), greatest(a, b), least(a, b, 2) FROM t", None),
    ("SELECT a, b FROM t WHERE b IS DISTINCT FROM a", None),
    ("SELECT count(*) FILTER (WHERE b > 1), sum(a) FILTER (WHERE c = 'x') FROM t", None),
    ("SELECT a, b FROM t WHERE b IN (1, NULL) OR b NOT IN (2, 3)", None),
    ("SELECT NOT (b > 1), (b > 1) IS TRUE, (b > 1) IS NOT FALSE FROM t", None),
    ("SELECT * FROM (SELECT a, b * 2 AS bb FROM t) AS s WHERE bb > 2", None),
    ("SELECT a, count(*) AS n FROM t GROUP BY a ORDER BY n DESC, a LIMIT 2", None),
    (
        "SELECT 1 / 2, 7 / 2.0, 2147483648, 1 + 1.5, -2147483648",
        "SELECT 1 // 2, 7 / 2.0, 2147483648, 1 + 1.5, -2147483648",
    ),
    ("SELECT x FROM u WHERE x > (1 + 1) AND y <> 'a' ORDER BY x NULLS LAST", None),
    ("SELECT sum(a * d) FROM t GROUP BY c", None),
]

ints = st.integers(-4, 6)
maybe_int = st.one_of(st.none(), ints)
text = st.one_of(st.none(), st.sampled_from(["a", "ab", "b", "x", "y", "A", ""]))
big = st.one_of(st.none(), st.integers(-(10**12), 10**12))
t_rows = st.lists(st.tuples(ints, maybe_int, text, big), max_size=7)
u_rows = st.lists(st.tuples(ints, maybe_int, text), max_size=6)


@pytest.fixture(scope="module")
def duck() -> Any:
    con = duckdb.connect()
    yield con
    con.close()


def _load(con: Any, t: list[tuple], u: list[tuple]) -> None:
    con.execute("CREATE OR REPLACE TABLE t (a INTEGER NOT NULL, b INTEGER, c VARCHAR, d BIGINT)")
    con.execute("CREATE OR REPLACE TABLE u (a INTEGER NOT NULL, x INTEGER, y VARCHAR)")
    if t:
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", t)
    if u:
        con.executemany("INSERT INTO u VALUES (?, ?, ?)", u)


def _norm(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float | decimal.Decimal):
        number = round(float(value), 6)
        return int(number) if number.is_integer() else number
    return value


def _norm_rows(rows: list[tuple]) -> list[tuple]:
    return [tuple(_norm(v) for v in row) for row in rows]


@pytest.mark.parametrize(("pg", "duck_sql"), QUERIES, ids=[q[0][:60] for q in QUERIES])
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(t=t_rows, u=u_rows)
def test_plan_matches_duckdb(duck: Any, pg: str, duck_sql: str | None, t: list, u: list) -> None:
    catalog = InMemoryCatalog()
    t_item = catalog.add_table("t", T_DESC)
    u_item = catalog.add_table("u", U_DESC)
    plan = plan_statement(pg, catalog)
    assert isinstance(plan, SelectPlan)
    _load(duck, t, u)
    try:
        ours = finish(evaluate(plan.expr, {t_item.id: t, u_item.id: u}), plan.finishing)
        our_error = None
    except EvalError as error:
        ours, our_error = [], error
    try:
        theirs = duck.execute(duck_sql or pg).fetchall()
        their_error = None
    except duckdb.Error as error:
        theirs, their_error = [], error
    assert (our_error is None) == (their_error is None), (our_error, their_error)
    if plan.finishing.order_by:
        assert _norm_rows(ours) == _norm_rows(theirs)
    else:
        assert Counter(_norm_rows(ours)) == Counter(_norm_rows(theirs))
