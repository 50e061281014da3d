"""Planning UNIQUE / PRIMARY KEY (sql/constraints.py) and the key counts
group commit enforces them with."""

from __future__ import annotations

import pytest

from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql import CreateTablePlan, InMemoryCatalog, plan_statement
from coordinator_lib.sql.constraints import KeyCounts, UniqueConstraint, UniqueViolation
from coordinator_lib.sql.errors import (
    DuplicateConstraint,
    InvalidTableDefinition,
    UnknownColumn,
    UnsupportedFeature,
)


def plan(sql: str) -> CreateTablePlan:
    planned = plan_statement(sql, InMemoryCatalog())
    assert isinstance(planned, CreateTablePlan)
    return planned


def test_column_constraints_are_named_like_postgres() -> None:
    p = plan("CREATE TABLE t (a int PRIMARY KEY, b text UNIQUE, c int CONSTRAINT own UNIQUE)")
    assert p.unique == (
        UniqueConstraint("t_pkey", (0,), primary=True),
        UniqueConstraint("t_b_key", (1,)),
        UniqueConstraint("own", (2,)),
    )
    # PRIMARY KEY implies NOT NULL; UNIQUE does not.
    assert p.desc.types[0] == ColumnType(ScalarType.INTEGER, False)
    assert p.desc.types[1].nullable and p.desc.types[2].nullable
    # Only the NOT NULL key is a key of the relation (NULLs may repeat in b, c).
    assert p.desc.keys == ((0,),)
    assert "PRIMARY KEY" in p.create_sql and "UNIQUE" in p.create_sql
    assert "CONSTRAINT own UNIQUE" in p.create_sql


def test_table_constraints() -> None:
    p = plan(
        "CREATE TABLE t (a int NOT NULL, b int, c int, PRIMARY KEY (b, c), UNIQUE (a), "
        "CONSTRAINT pair UNIQUE (a, b), UNIQUE NULLS NOT DISTINCT (c))"
    )
    assert [(c.name, c.columns, c.primary) for c in p.unique] == [
        ("t_pkey", (1, 2), True),
        ("t_a_key", (0,), False),
        ("pair", (0, 1), False),
        ("t_c_key", (2,), False),
    ]
    assert p.unique[-1].nulls_not_distinct
    assert [t.nullable for t in p.desc.types] == [False, False, False]
    assert set(p.desc.keys) == {(1, 2), (0,), (0, 1), (2,)}
    assert "PRIMARY KEY (b, c)" in p.create_sql


def test_repeated_key_is_one_constraint_and_names_do_not_clash() -> None:
    p = plan("CREATE TABLE t (a int UNIQUE, UNIQUE (a), t_a_key int UNIQUE)")
    assert [c.name for c in p.unique] == ["t_a_key", "t_t_a_key_key"]


@pytest.mark.parametrize(
    ("sql", "error", "code"),
    [
        ("CREATE TABLE t (a int PRIMARY KEY, b int PRIMARY KEY)", InvalidTableDefinition, "42P16"),
        ("CREATE TABLE t (a int, PRIMARY KEY (a, a))", InvalidTableDefinition, "42P16"),
        ("CREATE TABLE t (a int, UNIQUE (b))", UnknownColumn, "42703"),
        (
            "CREATE TABLE t (a int CONSTRAINT k UNIQUE, b int CONSTRAINT k UNIQUE)",
            DuplicateConstraint,
            "42710",
        ),
        ("CREATE TABLE t (a int REFERENCES u (a))", UnsupportedFeature, "0A000"),
    ],
)
def test_bad_constraints(sql: str, error: type, code: str) -> None:
    with pytest.raises(error) as info:
        plan(sql)
    assert info.value.code == code


def test_key_counts_admit_all_or_nothing() -> None:
    pk = UniqueConstraint("t_pkey", (0,), primary=True)
    uq = UniqueConstraint("t_b_key", (1,))
    counts = KeyCounts.of_rows((pk, uq), ("a", "b"), [((1, "x"), 1), ((2, None), 1)])
    # A NULL never conflicts; a retraction frees its key for the same writer.
    counts.admit([((3, None), 1)])
    counts.admit([((1, "x"), -1), ((1, "y"), 1)])
    before = [dict(c) for c in counts.counts]
    with pytest.raises(UniqueViolation) as info:
        counts.admit([((4, "z"), 1), ((5, "y"), 1)])
    assert info.value.code == "23505"
    assert str(info.value) == 'duplicate key value violates unique constraint "t_b_key"'
    assert info.value.detail == "Key (b)=(y) already exists."
    assert [dict(c) for c in counts.counts] == before  # nothing of the writer applied
    with pytest.raises(UniqueViolation, match="t_pkey"):
        counts.admit([((6, "p"), 1), ((6, "q"), 1)])  # a duplicate within one writer


def test_nulls_not_distinct_conflict() -> None:
    uq = UniqueConstraint("t_a_key", (0,), nulls_not_distinct=True)
    counts = KeyCounts.of_rows((uq,), ("a",), [((None,), 1)])
    with pytest.raises(UniqueViolation) as info:
        counts.admit([((None,), 1)])
    assert info.value.detail == "Key (a)=(null) already exists."
