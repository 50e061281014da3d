"""A catalog with the tables the SQL tests plan against, and small helpers."""

from __future__ import annotations

from coordinator_lib.repr import RelationDesc
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql import InMemoryCatalog, Plan, SelectPlan, plan_statement

# t: one column of most types; u: joins with t on `a`.
T_DESC = RelationDesc.of(
    ("a", "integer", False),
    ("b", "text"),
    ("c", "bigint"),
    ("d", "date"),
    ("e", "double precision"),
    ("f", "numeric"),
    ("g", "boolean"),
    ("h", "smallint"),
    ("i", "real"),
    ("j", "timestamp"),
    ("k", "timestamp with time zone"),
    ("l", "jsonb"),
    ("m", "bytea"),
)
U_DESC = RelationDesc.of(("a", "integer", False), ("x", "double precision"), ("y", "text"))
W_DESC = RelationDesc.of(("id", "bigint", False), ("a", "integer"), keys=((0,),))


def make_catalog() -> InMemoryCatalog:
    catalog = InMemoryCatalog()
    catalog.add_table("t", T_DESC)  # u1
    catalog.add_table("u", U_DESC)  # u2
    catalog.add_table("w", W_DESC)  # u3
    return catalog


def select(sql: str, catalog: InMemoryCatalog | None = None) -> SelectPlan:
    plan = plan_statement(sql, catalog or make_catalog())
    assert isinstance(plan, SelectPlan), plan
    return plan


def plan(sql: str, catalog: InMemoryCatalog | None = None) -> Plan:
    return plan_statement(sql, catalog or make_catalog())


def col(st: str, nullable: bool = True) -> ColumnType:
    return ColumnType(ScalarType(st), nullable)


def output_types(p: SelectPlan) -> list[tuple[str, bool]]:
    """(type name, nullable) of each visible output column."""
    return [(t.scalar_type.value, t.nullable) for t in p.desc.types]
