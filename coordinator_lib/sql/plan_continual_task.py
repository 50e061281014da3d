"""CREATE CONTINUAL TASK (Materialize's continual tasks).

A continual task watches its input and, for each time `t` at which rows were
inserted into the input, runs its statements once, writing to its own
collection at `t`. In the body, the input's name means the rows inserted
into it at `t` (not its contents), the task's own name means its contents
just before `t` plus what the earlier statements of the same run wrote, and
any other name means that relation's contents at `t`. The statements are
`INSERT INTO <task> ...` and `DELETE FROM <task> ...` only.

Planning binds the body with the task visible under its own name as a table
whose id is `SELF` (it has no id until the catalog stores it); the adapter
(`adapter/continual_task.py`) replaces `Get(SELF)` and `Get(input)` by
constants at each time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.sql.catalog import CatalogItem, ItemKind, QualifiedName
from coordinator_lib.sql.context import PlanContext
from coordinator_lib.sql.continual_task_syntax import CreateContinualTask
from coordinator_lib.sql.errors import SqlError, UnsupportedFeature, WrongObjectType
from coordinator_lib.sql.plan_core import (
    item_create_sql,
    plan_create_table,
    plan_delete,
    plan_insert,
)
from coordinator_lib.sql.plans import DeletePlan, InsertPlan, Plan
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.scope import table_parts

# The task's own id while its body is planned (replaced at run time).
SELF = GlobalId.transient((1 << 62) + 1)

# What a continual task can read its input from: a collection with history.
_INPUT_KINDS = (
    ItemKind.TABLE,
    ItemKind.SOURCE,
    ItemKind.MATERIALIZED_VIEW,
    ItemKind.CONTINUAL_TASK,
)


@dataclass(frozen=True)
class CreateContinualTaskPlan(Plan):
    """`statements` in order: ("insert", rows to add) or ("delete", rows to
    retract, a Filter over `Get(SELF)`); both read `Get(SELF)` and
    `Get(input)` as described in the module docstring."""

    name: QualifiedName
    desc: RelationDesc
    input: GlobalId
    statements: tuple[tuple[str, RelationExpr], ...]
    if_not_exists: bool = False
    depends_on: frozenset[GlobalId] = field(default_factory=frozenset)
    create_sql: str = ""


class _WithTask:
    """The session's catalog plus the task being created, as a table."""

    def __init__(self, inner: Any, item: CatalogItem) -> None:
        self.inner = inner
        self.item = item
        self.database = inner.database
        self.search_path = inner.search_path

    def resolve(self, name: tuple[str, ...]) -> CatalogItem:
        try:
            if self.inner.qualify(name) == self.item.name:
                return self.item
        except SqlError:
            pass
        return self.inner.resolve(name)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)


def plan_create_continual_task(statement: CreateContinualTask, ctx: PlanContext) -> Plan:
    schema: exp.Schema = statement.this
    if_not_exists = bool(statement.args.get("exists"))
    # The columns are a table's: the same types, NOT NULL, and name checks.
    table = plan_create_table(
        exp.Create(this=schema.copy(), kind="TABLE", exists=if_not_exists),
        PlanContext(ctx.catalog, ctx.text, ctx.planner),
    )
    name, desc = table.name, table.desc
    input_node: exp.Table = statement.args["input"]
    input_item = ctx.resolve(table_parts(input_node), input_node)
    if input_item.kind not in _INPUT_KINDS:
        raise WrongObjectType(
            f"the input of a continual task must be a table, source, materialized view or"
            f" continual task; '{input_item.name}' is a {input_item.kind.sql_name}",
            position_of(input_node),
        )
    body_ctx = PlanContext(
        _WithTask(ctx.catalog, CatalogItem(SELF, name, ItemKind.TABLE, desc)),
        ctx.text,
        ctx.planner,
    )
    body_ctx.references = ctx.references
    body_ctx.names = ctx.names
    body_ctx.qualified = ctx.qualified
    statements: list[tuple[str, RelationExpr]] = []
    for node in statement.args["statements"]:
        if isinstance(node, exp.Insert):
            planned: Plan = plan_insert(node, body_ctx)
        elif isinstance(node, exp.Delete):
            planned = plan_delete(node, body_ctx)
        else:
            raise UnsupportedFeature(
                "a continual task's statements must be INSERT or DELETE", position_of(node)
            )
        assert isinstance(planned, InsertPlan | DeletePlan)
        if planned.id != SELF:
            target = node.this.this if isinstance(node.this, exp.Schema) else node.this
            raise UnsupportedFeature(
                f"a continual task can only write to itself ('{name}')", position_of(target)
            )
        if isinstance(planned, InsertPlan):
            statements.append(("insert", planned.expr))
        else:
            statements.append(("delete", planned.retract))
    if not statements:
        raise UnsupportedFeature(
            "a continual task needs at least one statement", position_of(statement)
        )
    return CreateContinualTaskPlan(
        name=name,
        desc=desc,
        input=input_item.id,
        statements=tuple(statements),
        if_not_exists=if_not_exists,
        depends_on=frozenset(ctx.references - {SELF}),
        create_sql=item_create_sql(statement, ctx, schema.this, name),
    )


PLANNERS = {CreateContinualTask: plan_create_continual_task}
