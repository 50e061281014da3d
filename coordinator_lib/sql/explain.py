"""EXPLAIN of a statement: a peek's finishing line above the operator tree
that the plan language's printer (expr/explain.py) draws."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from coordinator_lib.expr.explain import (
    columns_list,
    describe,
    explain,
    format_aggregate,
    format_literal,
    format_scalar,
)
from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.sql.plans import ExplainPlan, RowSetFinishing, SelectPlan

__all__ = [
    "describe",
    "explain",
    "explain_plan",
    "format_aggregate",
    "format_finishing",
    "format_literal",
    "format_scalar",
]


def format_finishing(finishing: RowSetFinishing, arity: int) -> str | None:
    """The `Finish ...` line of a peek, or None when finishing does nothing."""
    if finishing.is_trivial(arity):
        return None
    parts = ["Finish"]
    if finishing.order_by:
        keys = [
            f"#{o.column} {'desc' if o.desc else 'asc'} nulls_{'last' if o.nulls_last else 'first'}"
            for o in finishing.order_by
        ]
        parts.append(f"order_by=[{', '.join(keys)}]")
    if finishing.limit is not None:
        parts.append(f"limit={finishing.limit}")
    if finishing.offset:
        parts.append(f"offset={finishing.offset}")
    parts.append(f"output=[{columns_list(finishing.project)}]")
    return " ".join(parts)


def explain_plan(
    plan: ExplainPlan,
    annotate: Callable[[RelationExpr], str] | None = None,
    draw: Callable[[RelationExpr, Mapping[GlobalId, str]], str] | None = None,
) -> str:
    """EXPLAIN output for an ExplainPlan: the finishing of a peek first, then
    the tree: the operators (`annotate` marks each line), or what `draw`
    draws of the expression (EXPLAIN PHYSICAL PLAN: the step plan)."""
    if draw is not None:
        text = draw(plan.expr, plan.names)
    else:
        text = explain(plan.expr, annotate, plan.names)
    if isinstance(plan.plan, SelectPlan):
        finish = format_finishing(plan.plan.finishing, plan.expr.desc.arity)
        if finish:
            text = finish + "\n" + "\n".join("  " + line for line in text.splitlines())
    return text
