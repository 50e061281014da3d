"""Row constructors compared with ANY / ALL of a subquery (and IN / NOT IN
of one), held to a real PostgreSQL: the eight comparisons of
test_sql_answers_postgres's `row_any_all_ordered` in one view across
DELETEs on both sides, with the plan that keeps its steps cheap, and every
operator and quantifier on random rows with NULLs (hypothesis), and fields
of other types as PostgreSQL types them. A server
of their own: the answers module's ~200 views make each of its writes
wait seconds."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.served import connect, served
from tests.server.test_sql_answers_postgres import QUERIES, outcome

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def tidemark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[psycopg.Connection[Any]]:
    with served(tmp_path_factory.mktemp("row-quantified") / "env") as env, connect(env) as conn:
        yield conn


@pytest.fixture(scope="module")
def postgres(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        yield conn


ROW_ANY_ALL_VIEW = QUERIES["row_any_all_ordered"].replace("t1", "ra_t").replace("t2", "ra_u")


def test_row_any_all_view_follows_writes(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    """The eight row comparisons with ANY / ALL in one view stay PostgreSQL's
    answers across INSERT and DELETE on both sides. Each comparison is one
    semi-join of the view's distinct rows with the subquery (one CrossJoin
    and one Reduce each, joined once with the table): it was a CASE over two
    EXISTS each, the second evaluated only for the rows the first left
    undecided, which copied the whole first join into each of the eight
    (a 6,000-line plan whose step after a DELETE took minutes)."""
    for conn in (tidemark, postgres):
        temp = "TEMP " if conn is postgres else ""
        conn.execute(f"CREATE {temp}TABLE ra_t (k int, x int)")
        conn.execute(f"CREATE {temp}TABLE ra_u (k int, x int)")
        conn.execute("INSERT INTO ra_t VALUES (1, 10), (2, 20), (2, 20), (3, NULL), (NULL, 1)")
        conn.execute("INSERT INTO ra_u VALUES (2, 200), (3, 300), (NULL, 5)")
    plan = [r[0] for r in tidemark.execute(f"EXPLAIN {ROW_ANY_ALL_VIEW}").fetchall()]
    text = "\n".join(plan)
    assert text.count("CrossJoin") == 8 and text.count("Reduce") == 8, text
    assert text.count("Join on=") == 1, text
    tidemark.execute(f"CREATE MATERIALIZED VIEW row_any_all_eight AS {ROW_ANY_ALL_VIEW}")
    assert outcome(tidemark, "SELECT * FROM row_any_all_eight") == outcome(
        postgres, ROW_ANY_ALL_VIEW
    )
    for statement in [
        "DELETE FROM ra_t WHERE k = 1",
        "DELETE FROM ra_u WHERE k = 3 OR k IS NULL",
        "DELETE FROM ra_u",
    ]:
        tidemark.execute(statement)
        postgres.execute(statement)
        expected = outcome(postgres, ROW_ANY_ALL_VIEW)
        assert outcome(tidemark, "SELECT * FROM row_any_all_eight") == expected, statement


# Every operator and quantifier, IN and NOT IN, correlated, in a SELECT list
# and in a WHERE: held to PostgreSQL on random rows with NULLs and ties. Each
# example writes its rows under a new g (no DELETE to wait for).
_U = "SELECT x, y FROM rq_u WHERE g = {g}"
ROW_QUANTIFIED = {
    "select": "SELECT k, a, b, "
    + ", ".join(
        f"(a, b) {op} {q} ({_U}) AS {name}_{q.lower()}"
        for op, name in [
            ("<", "lt"),
            ("<=", "le"),
            (">", "gt"),
            (">=", "ge"),
            ("=", "eq"),
            ("<>", "ne"),
        ]
        for q in ("ANY", "ALL")
    )
    + f", (a, b) IN ({_U}) AS i, (a, b) NOT IN ({_U}) AS ni,"
    " (b, a) < ALL (SELECT y, x FROM rq_u WHERE g = {g} AND rq_u.x >= rq_t.a) AS corr"
    " FROM rq_t WHERE g = {g}",
    "where": "SELECT k FROM rq_t WHERE g = {g} AND (a, b) >= ANY (SELECT x, y FROM rq_u"
    " WHERE g = {g} AND y IS NOT NULL) AND NOT (a, b) <> ALL (SELECT y, x FROM rq_u WHERE g = {g})",
}
_cell = st.one_of(st.none(), st.integers(0, 2))
_pairs = st.lists(st.tuples(_cell, _cell), max_size=4)
_generation = itertools.count(1)


@pytest.fixture(scope="module")
def row_quantified_tables(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    for conn in (tidemark, postgres):
        temp = "TEMP " if conn is postgres else ""
        conn.execute(f"CREATE {temp}TABLE rq_t (g int, k int, a int, b int)")
        conn.execute(f"CREATE {temp}TABLE rq_u (g int, x int, y int)")


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(left=_pairs, right=_pairs, form=st.sampled_from(sorted(ROW_QUANTIFIED)))
def test_row_any_all_as_postgres_on_random_rows(
    tidemark: psycopg.Connection[Any],
    postgres: psycopg.Connection[Any],
    row_quantified_tables: None,
    left: list[tuple[int | None, int | None]],
    right: list[tuple[int | None, int | None]],
    form: str,
) -> None:
    """Row comparisons with ANY / ALL (one semi-join each) give PostgreSQL's
    three values: NULL fields, ties on the first field, an empty subquery."""
    g = next(_generation)
    for conn in (tidemark, postgres):
        if left:
            conn.execute(
                "INSERT INTO rq_t VALUES " + ", ".join(["(%s, %s, %s, %s)"] * len(left)),
                [v for k, row in enumerate(left) for v in (g, k, *row)],
            )
        if right:
            conn.execute(
                "INSERT INTO rq_u VALUES " + ", ".join(["(%s, %s, %s)"] * len(right)),
                [v for row in right for v in (g, *row)],
            )
    query = ROW_QUANTIFIED[form].format(g=g)
    assert outcome(tidemark, query) == outcome(postgres, query), query


TYPED = [
    # The subquery's untyped NULL is text, as in PostgreSQL: 42883 bigint = text
    "SELECT k, (k, b) = ANY (SELECT 1, NULL) AS a FROM rt",
    "SELECT k, (k, b) IN (SELECT 1, NULL) AS a FROM rt",
    "SELECT k, (k, s) IN (SELECT k, 'a' FROM rt) AS a FROM rt",
    "SELECT k, (1, NULL) < ANY (SELECT k, b FROM rt) AS a FROM rt",
    "SELECT k, (k, b) < ALL (SELECT n, k FROM rt) AS a FROM rt",
    "SELECT k, (k, b, s) <> ALL (SELECT k, b, s FROM rt WHERE k = 1) AS a FROM rt",
    "SELECT k, (k, b) <= ANY (VALUES (1, 10), (2, 3)) AS a FROM rt",
    "SELECT k, (k, s) < ANY (SELECT b, s FROM rt) AS a FROM rt",
]


@pytest.fixture(scope="module")
def typed_table(tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]) -> None:
    for conn in (tidemark, postgres):
        temp = "TEMP " if conn is postgres else ""
        conn.execute(f"CREATE {temp}TABLE rt (k int, b bigint, s text, n numeric)")
        conn.execute(
            "INSERT INTO rt VALUES (1, 10, 'a', 1.5), (2, NULL, 'b', NULL), (NULL, 3, NULL, 2)"
        )


@pytest.mark.parametrize("query", TYPED)
def test_row_any_all_types_as_postgres(
    tidemark: psycopg.Connection[Any],
    postgres: psycopg.Connection[Any],
    typed_table: None,
    query: str,
) -> None:
    """Fields of other types meet as PostgreSQL's operators have them, or
    fail with its SQLSTATE (the subquery's columns are never coerced to
    the row's: unlike a single value's `= ANY`)."""
    assert outcome(tidemark, query) == outcome(postgres, query)
