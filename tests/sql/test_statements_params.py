"""`$n` query parameters: counting, inferring types, binding text values, and
refusing unbound ones."""

from __future__ import annotations

import pytest
from sqlglot import exp

from coordinator_lib.expr import Constant
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.sql import (
    InsertPlan,
    SelectPlan,
    UpdatePlan,
    bind_parameters,
    parameter_count,
    parameter_types,
    parse_statements,
    plan_parsed,
)
from coordinator_lib.sql.coercion import scalar_type_of
from coordinator_lib.sql.errors import InvalidTextRepresentation, UndefinedParameter
from coordinator_lib.sql.params import data_type
from tests.sql.support import make_catalog, select

S = ScalarType


def parsed(sql: str) -> exp.Expr:
    [statement] = parse_statements(sql)
    return statement


def bound_plan(sql: str, values: list[str | None], types: list[ScalarType | None] | None = None):
    statement = bind_parameters(parsed(sql), values, types or [])
    return plan_parsed(statement, make_catalog(), sql)


def test_parameter_count() -> None:
    assert parameter_count(parsed("SELECT 1")) == 0
    assert parameter_count(parsed("SELECT $1, $3 FROM t WHERE a = $2")) == 3
    assert parameter_count(parsed("SELECT $2")) == 2


@pytest.mark.parametrize("st", list(ScalarType))
def test_every_type_can_be_written(st: ScalarType) -> None:
    assert scalar_type_of(data_type(st)) is st


def test_unknown_parameter_is_typed_by_its_context() -> None:
    plan = bound_plan("SELECT a FROM t WHERE a = $1", ["5"])
    assert plan == select("SELECT a FROM t WHERE a = 5")
    plan = bound_plan("SELECT a FROM t WHERE d > $1", ["2020-01-02"])
    assert plan == select("SELECT a FROM t WHERE d > DATE '2020-01-02'")


def test_known_type_casts_the_text() -> None:
    plan = bound_plan("SELECT $1 AS x", ["5"], [S.INTEGER])
    assert isinstance(plan, SelectPlan)
    assert plan.desc.types[0].scalar_type is S.INTEGER
    assert plan == select("SELECT 5 AS x")


def test_null_values() -> None:
    plan = bound_plan("SELECT $1 AS x", [None], [S.BIGINT])
    assert isinstance(plan, SelectPlan) and plan.desc.types[0].scalar_type is S.BIGINT
    plan = bound_plan("SELECT a FROM t WHERE b = $1", [None])
    assert plan == select("SELECT a FROM t WHERE b = NULL")


def test_insert_with_text_values() -> None:
    plan = bound_plan("INSERT INTO u VALUES ($1, $2, $3)", ["1", "2.5", "hi"])
    assert isinstance(plan, InsertPlan) and isinstance(plan.expr, Constant)
    assert plan.expr.rows == (((1, 2.5, "hi"), 1),)
    plan = bound_plan("INSERT INTO u (y, a) VALUES ($1, $2), ($3, $4)", ["p", "1", None, "2"])
    assert isinstance(plan, InsertPlan) and isinstance(plan.expr, Constant)
    assert plan.expr.rows == (((1, None, "p"), 1), ((2, None, None), 1))


def test_update_and_limit() -> None:
    plan = bound_plan("UPDATE t SET b = $1 WHERE a IN ($2, $3)", ["x", "1", "2"])
    assert isinstance(plan, UpdatePlan)
    plan = bound_plan("SELECT a FROM t ORDER BY a LIMIT $1 OFFSET $2", ["3", "1"])
    assert isinstance(plan, SelectPlan)
    assert plan.finishing.limit == 3 and plan.finishing.offset == 1
    typed = bound_plan("SELECT a FROM t LIMIT $1", ["4"], [S.BIGINT])
    assert isinstance(typed, SelectPlan) and typed.finishing.limit == 4


def test_binding_leaves_the_parsed_statement_alone() -> None:
    statement = parsed("SELECT a FROM t WHERE a = $1")
    bind_parameters(statement, ["1"])
    assert statement.find(exp.Parameter) is not None


def test_bad_value_points_at_the_parameter() -> None:
    with pytest.raises(InvalidTextRepresentation) as info:
        bound_plan("SELECT a FROM t WHERE a = $1", ["five"])
    assert info.value.position == 27
    with pytest.raises(InvalidTextRepresentation) as info:
        bound_plan("SELECT $1", ["five"], [S.INTEGER])
    assert info.value.position == 8


@pytest.mark.parametrize(
    ("sql", "values", "missing", "position"),
    [
        ("SELECT a FROM t WHERE a = $1", [], 1, 27),
        ("SELECT $2, $1", ["1"], 2, 8),
        ("INSERT INTO u VALUES ($1, $2)", ["1"], 2, 27),
        ("SELECT a FROM t LIMIT $1", [], 1, 23),
    ],
)
def test_unbound_parameters_are_refused(
    sql: str, values: list[str], missing: int, position: int
) -> None:
    with pytest.raises(UndefinedParameter) as info:
        bound_plan(sql, values)  # type: ignore[arg-type]
    assert info.value.code == "42P02"
    assert info.value.message == f"there is no parameter ${missing}"
    assert info.value.position == position


@pytest.mark.parametrize(
    ("sql", "types"),
    [
        ("SELECT 1", []),
        ("SELECT $1", [None]),
        ("SELECT $1::bigint, CAST($2 AS date)", [S.BIGINT, S.DATE]),
        ("SELECT * FROM t WHERE a = $1 AND $2 < e", [S.INTEGER, S.DOUBLE]),
        ("SELECT * FROM t x WHERE x.d >= $1", [S.DATE]),
        ("SELECT * FROM t, u WHERE t.a = $1 AND u.y LIKE $2", [S.INTEGER, S.TEXT]),
        ("SELECT * FROM t, u WHERE a = $1", [None]),  # ambiguous: no guess
        (
            "SELECT * FROM t WHERE c IN ($1, $2) OR h BETWEEN $3 AND $4",
            [S.BIGINT] * 2 + [S.SMALLINT] * 2,
        ),
        ("INSERT INTO u VALUES ($1, $2, $3)", [S.INTEGER, S.DOUBLE, S.TEXT]),
        ("INSERT INTO u (y, a) VALUES ($1, $2)", [S.TEXT, S.INTEGER]),
        ("INSERT INTO u (x) SELECT $1", [S.DOUBLE]),
        ("UPDATE t SET g = $1 WHERE k < $2", [S.BOOLEAN, S.TIMESTAMPTZ]),
        ("DELETE FROM w WHERE id = $1", [S.BIGINT]),
        ("SELECT a FROM t LIMIT $1 OFFSET $2", [S.BIGINT, S.BIGINT]),
        ("SELECT a FROM nope WHERE a = $1", [None]),
    ],
)
def test_parameter_types(sql: str, types: list[ScalarType | None]) -> None:
    assert parameter_types(parsed(sql), make_catalog()) == types


def test_inferred_types_bind_and_plan() -> None:
    sql = "SELECT a FROM t WHERE j < $1"
    types = parameter_types(parsed(sql), make_catalog())
    plan = bound_plan(sql, ["2024-01-02 03:04:05"], types)
    assert plan == select("SELECT a FROM t WHERE j < TIMESTAMP '2024-01-02 03:04:05'")
