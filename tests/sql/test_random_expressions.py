"""Random expressions over typed columns either plan with a consistent type
or raise SqlError, never another exception. "Consistent" is checked by
evaluating the plan (reference evaluator) on random rows: every value must
fit the declared column type and nullability, and evaluation may only fail
the way PostgreSQL fails at run time (overflow, division by zero, bad casts)."""

from __future__ import annotations

import datetime as dt
import decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_lib.repr import GlobalId
from coordinator_lib.sql import SelectPlan, plan_statement
from coordinator_lib.sql.errors import SqlError
from tests.sql.reference_eval import EvalError, evaluate
from tests.sql.support import T_DESC, make_catalog

CATALOG = make_catalog()
T = GlobalId.user(1)
COLUMNS = list(T_DESC.names)
BINARY = ["+", "-", "*", "/", "%", "=", "<>", "<", "<=", ">", ">=", "AND", "OR", "||", "LIKE"]
UNARY = [
    "-{}",
    "NOT {}",
    "{} IS NULL",
    "{} IS NOT NULL",
    "{} IS TRUE",
    "abs({})",
    "lower({})",
    "upper({})",
    "length({})",
]
TYPES = [
    "int",
    "bigint",
    "smallint",
    "numeric",
    "double precision",
    "real",
    "text",
    "bool",
    "date",
    "timestamp",
    "timestamptz",
    "jsonb",
    "bytea",
]

leaves = st.one_of(
    st.sampled_from(COLUMNS),
    st.integers(-5, 3_000_000_000).map(str),
    st.sampled_from(["1.5", "0.25", "1e3", "2147483647", "32767"]),
    st.sampled_from(["'x'", "'1'", "'2024-01-01'", "'t'", "''", "'{\"a\": 1}'"]),
    st.just("NULL"),
    st.sampled_from(["TRUE", "FALSE"]),
    st.just("DATE '2024-02-03'"),
)


def _extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(children, st.sampled_from(BINARY), children).map(
            lambda p: f"({p[0]} {p[1]} {p[2]})"
        ),
        st.tuples(st.sampled_from(UNARY), children).map(lambda p: p[0].format(f"({p[1]})")),
        st.tuples(children, children, children).map(
            lambda p: f"CASE WHEN {p[0]} THEN {p[1]} ELSE {p[2]} END"
        ),
        st.tuples(children, children).map(lambda p: f"coalesce({p[0]}, {p[1]})"),
        st.tuples(children, children).map(lambda p: f"nullif({p[0]}, {p[1]})"),
        st.tuples(children, children).map(lambda p: f"greatest({p[0]}, {p[1]})"),
        st.tuples(children, children, children).map(
            lambda p: f"({p[0]} BETWEEN {p[1]} AND {p[2]})"
        ),
        st.tuples(children, children, children).map(lambda p: f"({p[0]} IN ({p[1]}, {p[2]}))"),
        st.tuples(children, st.sampled_from(TYPES)).map(lambda p: f"CAST({p[0]} AS {p[1]})"),
    )


expressions = st.recursive(leaves, _extend, max_leaves=6)


def _maybe(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), strategy)


rows = st.lists(
    st.tuples(
        st.integers(-(2**31), 2**31 - 1) | st.integers(-3, 3),
        _maybe(st.sampled_from(["", "x", "A", "1", "t", "2024-01-01"])),
        _maybe(st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3)),
        _maybe(st.dates()),
        _maybe(st.floats(-1e6, 1e6)),
        _maybe(st.decimals(-1000, 1000, places=2)),
        _maybe(st.booleans()),
        _maybe(st.integers(-(2**15), 2**15 - 1)),
        _maybe(st.floats(-1e3, 1e3, width=32)),
        _maybe(st.datetimes(min_value=dt.datetime(1900, 1, 1))),
        _maybe(st.datetimes(min_value=dt.datetime(1900, 1, 1), timezones=st.just(dt.UTC))),
        _maybe(st.sampled_from(['{"a": 1}', "[1, 2]", "null", "3"])),
        _maybe(st.binary(max_size=3)),
    ),
    max_size=4,
)


def _check(sql: str, table: list[tuple]) -> None:
    try:
        plan = plan_statement(sql, CATALOG)
    except SqlError:
        return
    assert isinstance(plan, SelectPlan)
    desc = plan.desc
    try:
        result = evaluate(plan.expr, {T: table})
    except EvalError:
        return
    for row in result:
        projected = tuple(row[i] for i in plan.finishing.project)
        desc.validate_row(projected)


SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(expr=expressions, table=rows)
def test_select_expression(expr: str, table: list[tuple]) -> None:
    _check(f"SELECT {expr} FROM t", table)


@SETTINGS
@given(expr=expressions, table=rows)
def test_where_expression(expr: str, table: list[tuple]) -> None:
    _check(f"SELECT a, b FROM t WHERE {expr}", table)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    agg=st.sampled_from(["count", "sum", "avg", "min", "max", "count(DISTINCT"]),
    expr=expressions,
    table=rows,
)
def test_aggregate_expression(agg: str, expr: str, table: list[tuple]) -> None:
    call = f"{agg} {expr})" if agg.endswith("DISTINCT") else f"{agg}({expr})"
    _check(f"SELECT b, {call} FROM t GROUP BY b", table)
    _check(f"SELECT {call} FROM t", table)


def test_decimal_rows_are_valid() -> None:
    """The strategy's numeric values are what the desc accepts (sanity)."""
    T_DESC.validate_row((1, None, None, None, None, decimal.Decimal("1.5")) + (None,) * 7)
