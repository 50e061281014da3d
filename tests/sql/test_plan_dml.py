"""INSERT / UPDATE / DELETE become typed read-then-write plans."""

from __future__ import annotations

import datetime as dt
import decimal
from collections import Counter

import pytest

from coordinator_lib.expr import Constant, Filter, Get
from coordinator_lib.repr import GlobalId, RelationDesc
from coordinator_lib.sql import (
    DeletePlan,
    InMemoryCatalog,
    InsertPlan,
    UpdatePlan,
    plan_statement,
)
from coordinator_lib.sql.errors import (
    DuplicateColumn,
    InvalidTextRepresentation,
    NotNullViolation,
    NumericValueOutOfRange,
    ParseError,
    TypeMismatch,
    UnknownColumn,
    UnsupportedFeature,
    WrongObjectType,
)
from tests.sql.reference_eval import evaluate

DESC = RelationDesc.of(
    ("id", "bigint", False),
    ("name", "text"),
    ("price", "numeric"),
    ("day", "date"),
    ("n", "smallint"),
)
OTHER = RelationDesc.of(("k", "integer", False), ("v", "text"))


def catalog() -> InMemoryCatalog:
    c = InMemoryCatalog()
    c.add_table("items", DESC)
    c.add_table("other", OTHER)
    return c


def insert(sql: str) -> InsertPlan:
    plan = plan_statement(sql, catalog())
    assert isinstance(plan, InsertPlan)
    return plan


def test_insert_values_is_a_constant_in_table_order_and_types() -> None:
    plan = insert(
        "INSERT INTO items (day, id, price, name) VALUES "
        "('2024-01-02', 1, 2, 'x'), (NULL, -2147483648, 1.5, NULL), ('2024-03-04', 3, -7, DEFAULT)"
    )
    assert plan.id == GlobalId.user(1)
    assert isinstance(plan.expr, Constant)
    assert [t.scalar_type for t in plan.expr.desc.types] == [t.scalar_type for t in DESC.types]
    assert plan.expr.desc.names == DESC.names
    assert list(plan.expr.rows) == [
        ((1, "x", decimal.Decimal(2), dt.date(2024, 1, 2), None), 1),
        ((-2147483648, None, decimal.Decimal("1.5"), None, None), 1),
        ((3, None, decimal.Decimal(-7), dt.date(2024, 3, 4), None), 1),
    ]
    for row, _ in plan.expr.rows:  # rows the storage layer accepts
        DESC.validate_row(row)


def test_insert_assignment_casts_round_numeric_to_integer() -> None:
    plan = insert("INSERT INTO items (id, n) VALUES (2.5, 3), (-2.5, -3)")
    assert isinstance(plan.expr, Constant)
    assert [row[0] for row, _ in plan.expr.rows] == [3, -3]


def test_insert_select_casts_columns() -> None:
    plan = insert("INSERT INTO items (id, name) SELECT k, v FROM other WHERE k > 1")
    rows = evaluate(plan.expr, {GlobalId.user(2): [(1, "a"), (2, "b"), (3, None)]})
    assert rows == Counter({(2, "b", None, None, None): 1, (3, None, None, None, None): 1})
    assert plan.expr.desc.types[0].scalar_type.value == "bigint"


def test_insert_select_of_untyped_literals_takes_column_types() -> None:
    plan = insert("INSERT INTO items SELECT 1, NULL, '2.50', '2024-05-06', NULL")
    rows = evaluate(plan.expr, {})
    assert rows == Counter({(1, None, decimal.Decimal("2.50"), dt.date(2024, 5, 6), None): 1})


def test_insert_expressions_are_evaluated() -> None:
    plan = insert("INSERT INTO other VALUES (1 + 2, 'a' || 'b'), (4, lower('C'))")
    assert evaluate(plan.expr, {}) == Counter({(3, "ab"): 1, (4, "c"): 1})


def test_insert_default_values_and_short_rows() -> None:
    c = catalog()
    c.add_table("n", RelationDesc.of(("x", "integer"), ("y", "text")))
    plan = plan_statement("INSERT INTO n DEFAULT VALUES", c)
    assert isinstance(plan, InsertPlan) and evaluate(plan.expr, {}) == Counter({(None, None): 1})
    short = plan_statement("INSERT INTO n VALUES (1)", c)  # the first N columns
    assert isinstance(short, InsertPlan) and evaluate(short.expr, {}) == Counter({(1, None): 1})
    with pytest.raises(NotNullViolation) as info:
        plan_statement("INSERT INTO other (v) VALUES ('x')", c)
    assert info.value.code == "23502" and '"k"' in info.value.message


@pytest.mark.parametrize(
    ("sql", "error", "position"),
    [
        ("INSERT INTO items VALUES (NULL)", NotNullViolation, 13),
        ("INSERT INTO items (id) VALUES (true)", TypeMismatch, 32),
        ("INSERT INTO items (id) VALUES ('one')", InvalidTextRepresentation, 32),
        ("INSERT INTO items (id, n) VALUES (1, 40000)", NumericValueOutOfRange, 38),
        ("INSERT INTO items (id, nope) VALUES (1, 2)", UnknownColumn, 24),
        ("INSERT INTO items (id, id) VALUES (1, 2)", DuplicateColumn, 24),
        ("INSERT INTO items (id) VALUES (1, 2)", ParseError, 35),
        ("INSERT INTO items (id, name) SELECT k FROM other", ParseError, 24),
        ("INSERT INTO items (id, day) SELECT k, v FROM other", TypeMismatch, 39),
        ("INSERT INTO other VALUES (1, 'a', 2)", ParseError, 35),
        ("INSERT INTO items VALUES (1) RETURNING id", UnsupportedFeature, None),
    ],
)
def test_insert_errors(sql: str, error: type, position: int | None) -> None:
    with pytest.raises(error) as info:
        plan_statement(sql, catalog())
    if position is not None:
        assert info.value.position == position


def test_insert_into_a_view_is_refused() -> None:
    c = catalog()
    c.apply(plan_statement("CREATE VIEW v AS SELECT k FROM other", c))
    with pytest.raises(WrongObjectType, match="cannot insert into view"):
        plan_statement("INSERT INTO v VALUES (1)", c)


def test_delete_plan() -> None:
    plan = plan_statement("DELETE FROM other WHERE k > 1 AND v IS NOT NULL", catalog())
    assert isinstance(plan, DeletePlan)
    assert isinstance(plan.retract, Filter) and len(plan.retract.predicates) == 2
    rows = [(1, "a"), (2, "b"), (3, None)]
    assert evaluate(plan.retract, {plan.id: rows}) == Counter({(2, "b"): 1})
    everything = plan_statement("DELETE FROM other", catalog())
    assert isinstance(everything, DeletePlan) and isinstance(everything.retract, Get)


def test_update_plan_retracts_and_inserts() -> None:
    plan = plan_statement(
        "UPDATE items AS i SET price = i.price * 2, name = upper(name), n = DEFAULT WHERE id >= 2",
        catalog(),
    )
    assert isinstance(plan, UpdatePlan)
    rows = [
        (1, "a", decimal.Decimal(1), None, 1),
        (2, "b", decimal.Decimal("1.5"), None, 2),
        (3, None, None, dt.date(2024, 1, 1), 3),
    ]
    tables = {plan.id: rows}
    assert evaluate(plan.retract, tables) == Counter({rows[1]: 1, rows[2]: 1})
    assert evaluate(plan.insert, tables) == Counter(
        {
            (2, "B", decimal.Decimal("3.0"), None, None): 1,
            (3, None, None, dt.date(2024, 1, 1), None): 1,
        }
    )
    assert plan.insert.desc.names == DESC.names
    assert [t.scalar_type for t in plan.insert.desc.types] == [t.scalar_type for t in DESC.types]


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("UPDATE items SET nope = 1", UnknownColumn),
        ("UPDATE items SET id = 1, id = 2", ParseError),
        ("UPDATE items SET id = NULL", NotNullViolation),
        ("UPDATE items SET day = 5", TypeMismatch),
        ("UPDATE items SET id = sum(id)", Exception),
        ("UPDATE items SET id = 1 FROM other", UnsupportedFeature),
    ],
)
def test_update_errors(sql: str, error: type) -> None:
    with pytest.raises(error):
        plan_statement(sql, catalog())
