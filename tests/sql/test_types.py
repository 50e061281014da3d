"""Expression types follow PostgreSQL: literal typing, implicit widening,
operator resolution, aggregate result types, unknown literals taking their
context's type, and nullability."""

from __future__ import annotations

import datetime as dt
import decimal
from collections import Counter

import pytest

from coordinator_lib.expr import Cast, Column, Literal, Map, Project
from coordinator_lib.repr import GlobalId
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.sql.coercion import common_type, operator_type
from tests.sql.reference_eval import evaluate
from tests.sql.support import output_types, select

S = ScalarType

# expression over t -> (PostgreSQL type, nullable)
CASES = [
    ("1", "integer", False),
    ("2147483647", "integer", False),
    ("2147483648", "bigint", False),
    ("9223372036854775808", "numeric", False),
    ("-2147483648", "integer", False),
    ("-2147483649", "bigint", False),
    ("1.5", "numeric", False),
    ("1e3", "numeric", False),
    ("1/2", "integer", False),
    ("1/2.0", "numeric", False),
    ("7 % 2", "integer", False),
    ("a / 2", "integer", False),
    ("a + c", "bigint", True),
    ("a + h", "integer", True),
    ("h + h", "smallint", True),
    ("a + e", "double precision", True),
    ("a + f", "numeric", True),
    ("c * 2.5", "numeric", True),
    ("f + i", "double precision", True),
    ("i + i", "real", True),
    ("a + i", "double precision", True),
    ("-h", "smallint", True),
    ("a = c", "boolean", True),
    ("a < 1", "boolean", False),
    ("d = '2024-01-01'", "boolean", True),
    ("d < j", "boolean", True),
    ("j = k", "boolean", True),
    ("b || a", "text", True),
    ("'x' || 'y'", "text", False),
    ("a::text", "text", False),
    ("'5'::int", "integer", False),
    ("CAST(e AS integer)", "integer", True),
    ("'t'::bool", "boolean", False),
    ("e::numeric", "numeric", True),
    ("DATE '2024-01-01'", "date", False),
    ("NULL", "text", True),
    ("NULL + 1", "integer", True),
    ("NULL::bigint", "bigint", True),
    ("CASE WHEN g THEN 1 ELSE 2.5 END", "numeric", False),
    ("CASE WHEN g THEN 1 END", "integer", True),
    ("CASE WHEN g THEN 'x' ELSE NULL END", "text", True),
    ("CASE a WHEN 1 THEN d ELSE j END", "timestamp", True),
    ("coalesce(c, a)", "bigint", False),
    ("coalesce(c, 1)", "bigint", False),
    ("coalesce(b, 'none')", "text", False),
    ("coalesce(NULL, NULL)", "text", True),
    ("nullif(a, 1)", "integer", True),
    ("nullif(a, 1.5)", "integer", True),
    ("greatest(a, c, 1.5)", "numeric", False),
    ("least(e, 1)", "double precision", False),
    ("a BETWEEN 1 AND c", "boolean", True),
    ("a IN (1, 2)", "boolean", False),
    ("a IN (1, c)", "boolean", True),
    ("b LIKE 'x%'", "boolean", True),
    ("b NOT ILIKE 'x%'", "boolean", True),
    ("lower(b)", "text", True),
    ("upper('x')", "text", False),
    ("length(b)", "integer", True),
    ("char_length('abc')", "integer", False),
    ("abs(h)", "smallint", True),
    ("a IS NULL", "boolean", False),
    ("b IS NOT NULL", "boolean", False),
    ("g IS TRUE", "boolean", False),
    ("g IS NOT FALSE", "boolean", False),
    ("g AND a > 1", "boolean", True),
    ("NOT g", "boolean", True),
    ("a IS DISTINCT FROM c", "boolean", False),
    ('l = \'{"b": 1, "a": [1,2]}\'', "boolean", True),
    ("m = '\\x0102'", "boolean", True),
]


@pytest.mark.parametrize(("sql", "type_name", "nullable"), CASES, ids=[c[0] for c in CASES])
def test_expression_type(sql: str, type_name: str, nullable: bool) -> None:
    plan = select(f"SELECT {sql} FROM t")
    assert output_types(plan) == [(type_name, nullable)]


AGGREGATES = [
    ("count(*)", "bigint", False),
    ("count(b)", "bigint", False),
    ("count(DISTINCT b)", "bigint", False),
    ("sum(a)", "bigint", True),
    ("sum(h)", "bigint", True),
    ("sum(c)", "numeric", True),
    ("sum(f)", "numeric", True),
    ("sum(e)", "double precision", True),
    ("sum(i)", "real", True),
    ("avg(a)", "numeric", True),
    ("avg(c)", "numeric", True),
    ("avg(f)", "numeric", True),
    ("avg(e)", "double precision", True),
    ("avg(i)", "double precision", True),
    ("min(b)", "text", True),
    ("max(d)", "date", True),
    ("max(k)", "timestamp with time zone", True),
    ("sum(a) + 1", "bigint", True),
    ("count(*) * 2", "bigint", False),
    ("sum(a) / count(*)", "bigint", True),
]


@pytest.mark.parametrize(
    ("sql", "type_name", "nullable"), AGGREGATES, ids=[c[0] for c in AGGREGATES]
)
def test_aggregate_type(sql: str, type_name: str, nullable: bool) -> None:
    grouped = select(f"SELECT {sql} FROM t GROUP BY b")
    assert output_types(grouped) == [(type_name, nullable)]
    overall = select(f"SELECT {sql} FROM t")
    assert output_types(overall) == [(type_name, nullable)]


def _value(sql: str) -> object:
    plan = select(f"SELECT {sql}")
    [(row, count)] = evaluate(plan.expr, {}).items()
    assert count == 1
    return row[0]


@pytest.mark.parametrize(
    ("sql", "value"),
    [
        ("1/2", 0),
        ("7/2", 3),
        ("-7/2", -3),
        ("7 % -3", 1),
        ("-7 % 3", -1),
        ("1/2.0", decimal.Decimal("0.5")),
        ("-2147483648", -2147483648),
        ("'2024-02-03'::date", dt.date(2024, 2, 3)),
        ("'2024-02-03 04:05:06+02'::timestamptz", dt.datetime(2024, 2, 3, 2, 5, 6, tzinfo=dt.UTC)),
        ('\'{"bb": 1, "a": 2}\'::jsonb', '{"a": 2, "bb": 1}'),
        ("'\\x0102'::bytea", b"\x01\x02"),
        ("1 || 'a'", "1a"),
        ("NULL = NULL", None),
        ("NULL IS NULL", True),
        ("CASE WHEN NULL THEN 1 ELSE 2 END", 2),
    ],
)
def test_constant_values(sql: str, value: object) -> None:
    assert _value(sql) == value


def test_comparison_of_int_and_bigint_widens_the_int() -> None:
    plan = select("SELECT a = c FROM t")
    mapped = plan.expr.inputs()[0] if isinstance(plan.expr, Project) else plan.expr
    assert isinstance(mapped, Map)
    [scalar] = mapped.scalars
    assert scalar.left == Cast(Column(0), S.BIGINT)  # type: ignore[attr-defined]
    assert scalar.right == Column(2)  # type: ignore[attr-defined]


def test_unknown_literal_takes_the_column_type() -> None:
    plan = select("SELECT a FROM t WHERE d = '2024-01-01' AND a = '5'")
    predicates = plan.expr.inputs()[0].predicates  # type: ignore[attr-defined]
    assert predicates[0].right == Literal(dt.date(2024, 1, 1), predicates[0].right.type)
    assert predicates[1].right.value == 5
    assert predicates[1].right.type.scalar_type is S.INTEGER


def test_literals_are_folded_to_the_wider_type() -> None:
    plan = select("SELECT c + 1, e * 2, f - 3 FROM t")
    scalars = plan.expr.inputs()[0].scalars  # type: ignore[attr-defined]
    assert [s.right for s in scalars] == [
        Literal(1, scalars[0].right.type),
        Literal(2.0, scalars[1].right.type),
        Literal(decimal.Decimal(3), scalars[2].right.type),
    ]
    assert [s.right.type.scalar_type for s in scalars] == [S.BIGINT, S.DOUBLE, S.NUMERIC]


def test_integer_overflow_is_typed_for_the_renderer() -> None:
    """2147483647 + 1 stays integer arithmetic (an overflow error at run time)."""
    plan = select("SELECT 2147483647 + 1")
    assert output_types(plan) == [("integer", False)]


@pytest.mark.parametrize(
    ("types", "expected"),
    [
        ([S.INTEGER, S.NUMERIC], S.NUMERIC),
        ([S.NUMERIC, S.REAL], S.REAL),
        ([S.INTEGER, None], S.INTEGER),
        ([None, None], S.TEXT),
        ([S.DATE, S.TIMESTAMP], S.TIMESTAMP),
        ([S.TIMESTAMPTZ, S.DATE], S.TIMESTAMPTZ),
        ([S.TEXT, S.INTEGER], None),
        ([S.BOOLEAN, S.INTEGER], None),
    ],
)
def test_common_type(types: list, expected: ScalarType | None) -> None:
    assert common_type(types) is expected


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (S.INTEGER, S.BIGINT, S.BIGINT),
        (S.SMALLINT, S.INTEGER, S.INTEGER),
        (S.BIGINT, S.NUMERIC, S.NUMERIC),
        (S.NUMERIC, S.REAL, S.DOUBLE),
        (S.INTEGER, S.REAL, S.DOUBLE),
        (S.REAL, S.REAL, S.REAL),
        (S.DATE, S.TIMESTAMPTZ, S.TIMESTAMPTZ),
        (S.TEXT, S.INTEGER, None),
    ],
)
def test_operator_type(left: ScalarType, right: ScalarType, expected: ScalarType | None) -> None:
    assert operator_type(left, right) is expected


def test_avg_of_integers_is_exact_numeric() -> None:
    """avg(integer) is numeric, kept at numeric's stored scale of 10 places
    (decimal(38, 10); PostgreSQL's numeric is unbounded: a documented deviation)."""
    plan = select("SELECT avg(a) FROM t")
    rows = [(v,) + (None,) * 12 for v in (1, 2, 2)]
    [(value,)] = evaluate(plan.expr, {GlobalId.user(1): rows})
    assert isinstance(value, decimal.Decimal)
    assert value == decimal.Decimal("1.6666666667")
    assert Counter(evaluate(plan.expr, {GlobalId.user(1): []})) == Counter({(None,): 1})
