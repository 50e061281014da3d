"""mz_now() in the planner (sql/temporal.py): its typing against each type it
compares with, temporal filters in materialized views (and indexes on views,
SUBSCRIBE), and Materialize's errors for every other use, with SQLSTATE and
position."""

from __future__ import annotations

import datetime as dt

import pytest

from coordinator_lib.compute.explain import explain_view
from coordinator_lib.expr.relation import Filter, RelationExpr
from coordinator_lib.expr.scalar import BinaryFunc, CallBinary, Cast, Column
from coordinator_lib.expr.temporal import MzNow, TemporalFilter, contains_mz_now
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.sql import (
    CreateViewPlan,
    InMemoryCatalog,
    SelectPlan,
    SubscribePlan,
    plan_statement,
)
from coordinator_lib.sql.errors import (
    SqlError,
    UndefinedFunction,
    UndefinedOperator,
    UnsupportedFeature,
)

S = ScalarType


@pytest.fixture
def catalog() -> InMemoryCatalog:
    c = InMemoryCatalog()
    for ddl in [
        "CREATE TABLE ev (id integer, ts timestamp, tz timestamptz, d date,"
        " lo bigint, hi bigint, n numeric, f double precision, s text, small smallint)",
        "CREATE VIEW recent AS SELECT id, ts FROM ev WHERE mz_now() <= ts + INTERVAL '5 minutes'",
        "CREATE VIEW stamped AS SELECT id, mz_now() AS now FROM ev",
    ]:
        c.apply(plan_statement(ddl, c))
    return c


def _nodes(expr: RelationExpr) -> list[RelationExpr]:
    return [expr, *(n for child in expr.inputs() for n in _nodes(child))]


def _temporal(expr: RelationExpr) -> TemporalFilter:
    (found,) = [n for n in _nodes(expr) if isinstance(n, TemporalFilter)]
    return found


def view(sql: str, catalog: InMemoryCatalog) -> CreateViewPlan:
    plan = plan_statement(f"CREATE MATERIALIZED VIEW v AS {sql}", catalog)
    assert isinstance(plan, CreateViewPlan)
    return plan


@pytest.mark.parametrize(
    ("other", "scalar_type"),
    [
        ("lo", S.BIGINT),
        ("id", S.BIGINT),  # integer columns compare as bigint
        ("small + 1", S.BIGINT),
        ("n", S.NUMERIC),
        ("ts", S.TIMESTAMP),
        ("tz", S.TIMESTAMPTZ),
        ("d", S.TIMESTAMP),  # a date as the timestamp at its midnight
        ("ts + INTERVAL '1 hour'", S.TIMESTAMP),
        ("'1700000000000'", S.BIGINT),  # an untyped literal: a number ...
        ("'2024-01-01 00:00:00+00'", S.TIMESTAMPTZ),  # ... or a timestamp
    ],
)
def test_mz_now_takes_the_type_it_is_compared_with(
    catalog: InMemoryCatalog, other: str, scalar_type: ScalarType
) -> None:
    plan = plan_statement(f"SELECT id FROM ev WHERE mz_now() < {other}", catalog)
    assert isinstance(plan, SelectPlan)
    (filter_,) = [n for n in _nodes(plan.expr) if isinstance(n, Filter)]
    (predicate,) = filter_.predicates
    assert isinstance(predicate, CallBinary) and predicate.func is BinaryFunc.LT
    assert predicate.left == MzNow(scalar_type)
    types = filter_.input.desc.types
    assert predicate.right.typ(types).scalar_type is scalar_type


def test_mz_now_alone_is_a_bigint_in_a_query(catalog: InMemoryCatalog) -> None:
    plan = plan_statement("SELECT mz_now() AS now, mz_now() - 1000 AS before", catalog)
    assert isinstance(plan, SelectPlan)
    assert [t.scalar_type for t in plan.expr.desc.types] == [S.BIGINT, S.BIGINT]
    # a query may use it anywhere: it is replaced by the query's timestamp
    plan = plan_statement(
        "SELECT id, CASE WHEN mz_now() > lo OR mz_now() <> hi THEN 1 END FROM ev", catalog
    )
    assert contains_mz_now(plan.expr)


def test_view_where_becomes_a_temporal_filter(catalog: InMemoryCatalog) -> None:
    plan = view(
        "SELECT id FROM ev WHERE mz_now() >= lo AND id > 1 AND hi + 5000 > mz_now()"
        " AND mz_now() BETWEEN ts AND ts + INTERVAL '1 day' AND mz_now() = n",
        catalog,
    )
    temporal = _temporal(plan.expr)
    got = [(b.func, type(b.expr).__name__) for b in temporal.bounds]
    assert got == [
        (BinaryFunc.GTE, "Column"),
        (BinaryFunc.LT, "CallBinary"),  # `e > mz_now()` is `mz_now() < e`
        (BinaryFunc.GTE, "Column"),
        (BinaryFunc.LTE, "CallFunction"),
        (BinaryFunc.EQ, "Column"),
    ]
    assert isinstance(temporal.input, Filter)  # the other predicates stay below
    assert not contains_mz_now(plan.expr)
    text = explain_view(plan.expr)
    assert "TemporalFilter mz_now() >= #4 AND mz_now() < (#5 + 5000)" in text
    assert "[incremental: temporal]" in text


def test_having_and_inlined_views_become_temporal_filters(catalog: InMemoryCatalog) -> None:
    grouped = view("SELECT id, max(hi) AS h FROM ev GROUP BY id HAVING mz_now() < max(hi)", catalog)
    assert _temporal(grouped.expr).bounds[0].expr == Column(1)
    over_view = view("SELECT id, count(*) FROM recent GROUP BY id", catalog)
    bound = _temporal(over_view.expr).bounds[0]
    assert bound.func is BinaryFunc.LTE
    assert bound.expr.typ(_temporal(over_view.expr).input.desc.types).scalar_type is S.TIMESTAMP
    date_bound = _temporal(view("SELECT id FROM ev WHERE mz_now() >= d", catalog).expr).bounds[0]
    assert isinstance(date_bound.expr, Cast) and date_bound.expr.to is S.TIMESTAMP


def test_constant_bounds_are_folded_to_their_type(catalog: InMemoryCatalog) -> None:
    bound = _temporal(view("SELECT id FROM ev WHERE mz_now() < '2024-01-01'", catalog).expr).bounds[
        0
    ]
    assert bound.expr.typ(()).scalar_type is S.TIMESTAMPTZ
    assert bound.expr.value == dt.datetime(2024, 1, 1, tzinfo=dt.UTC)  # type: ignore[attr-defined]


# (view query, error, SQLSTATE, position in the CREATE statement or None, message words)
PREFIX = "CREATE MATERIALIZED VIEW v AS "
MISUSES = [
    ("SELECT id, mz_now() FROM ev", UnsupportedFeature, "0A000", 12, ["cannot materialize"]),
    ("SELECT id FROM ev WHERE mz_now() <> lo", UnsupportedFeature, "0A000", 25, ["temporal"]),
    (
        "SELECT id FROM ev WHERE mz_now() < lo OR id = 1",
        UnsupportedFeature,
        "0A000",
        25,
        ["Unsupported temporal predicate"],
    ),
    ("SELECT id FROM ev WHERE NOT (mz_now() < lo)", UnsupportedFeature, "0A000", 30, ["temporal"]),
    ("SELECT id FROM ev WHERE mz_now() - 10 < lo", UnsupportedFeature, "0A000", 25, ["temporal"]),
    ("SELECT id FROM ev WHERE mz_now() < mz_now()", UnsupportedFeature, "0A000", 25, ["temporal"]),
    (
        "SELECT id FROM ev WHERE CASE WHEN id > 1 THEN mz_now() < lo ELSE false END",
        UnsupportedFeature,
        "0A000",
        47,
        ["temporal"],
    ),
    (
        "SELECT id, count(*) FROM ev GROUP BY id, mz_now() > lo",
        UnsupportedFeature,
        "0A000",
        42,
        ["cannot materialize"],
    ),
    (
        "SELECT max(lo) FILTER (WHERE mz_now() < hi) FROM ev",
        UnsupportedFeature,
        "0A000",
        30,
        ["cannot materialize"],
    ),
    (
        "SELECT a.id FROM ev AS a JOIN ev AS b ON a.lo = b.hi OR mz_now() > a.lo",
        UnsupportedFeature,
        "0A000",
        57,
        ["temporal"],
    ),
    ("SELECT id FROM ev WHERE mz_now() < f", UndefinedOperator, "42883", 34, ["mz_timestamp < "]),
    ("SELECT id FROM ev WHERE s >= mz_now()", UndefinedOperator, "42883", 27, ["text >= mz_"]),
    ("SELECT id FROM ev WHERE mz_now(1) < lo", UndefinedFunction, "42883", 25, ["mz_now(integer)"]),
    # through a plain view: the call is in the view's text, so no position here
    ("SELECT * FROM stamped", UnsupportedFeature, "0A000", None, ["cannot materialize"]),
    ("SELECT id FROM ev WHERE now() > ts", UnsupportedFeature, "0A000", 25, ["now()"]),
]


@pytest.mark.parametrize(("sql", "error", "code", "position", "words"), MISUSES)
def test_mz_now_outside_a_temporal_filter_is_refused_in_a_view(
    catalog: InMemoryCatalog,
    sql: str,
    error: type[SqlError],
    code: str,
    position: int | None,
    words: list[str],
) -> None:
    with pytest.raises(error) as raised:
        plan_statement(PREFIX + sql, catalog)
    assert raised.value.code == code
    assert raised.value.position == (None if position is None else len(PREFIX) + position)
    for word in words:
        assert word in raised.value.message
    if position is not None and raised.value.code == "0A000" and "now()" not in words:
        assert (PREFIX + sql)[raised.value.position - 1 :].lower().startswith(("mz_now", "not"))


def test_index_on_a_view_and_subscribe_follow_the_view_rules(catalog: InMemoryCatalog) -> None:
    catalog.apply(plan_statement("CREATE INDEX recent_idx ON recent (id)", catalog))
    with pytest.raises(UnsupportedFeature, match="cannot materialize"):
        plan_statement("CREATE INDEX ON stamped (id)", catalog)
    subscribe = plan_statement("SUBSCRIBE (SELECT id FROM ev WHERE mz_now() < hi)", catalog)
    assert isinstance(subscribe, SubscribePlan)
    assert _temporal(subscribe.expr).bounds[0].func is BinaryFunc.LT
    with pytest.raises(UnsupportedFeature, match="cannot materialize"):
        plan_statement("SUBSCRIBE stamped", catalog)
    # a plain view may hold mz_now() anywhere: queries over it replace it
    assert isinstance(plan_statement("SELECT * FROM stamped", catalog), SelectPlan)


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO ev (id, lo) SELECT 1, mz_now()",
        "INSERT INTO ev (id) SELECT id FROM ev WHERE mz_now() > lo",
        "UPDATE ev SET lo = mz_now()",
        "DELETE FROM ev WHERE mz_now() > hi",
        "INSERT INTO ev (id) SELECT id FROM stamped",  # in the view's text: no position
    ],
)
def test_writes_refuse_mz_now(catalog: InMemoryCatalog, sql: str) -> None:
    with pytest.raises(UnsupportedFeature) as raised:
        plan_statement(sql, catalog)
    assert raised.value.code == "0A000"
    assert "mz_now in write statements" in raised.value.message
    at = sql.find("mz_now")
    assert raised.value.position == (None if at < 0 else at + 1)
