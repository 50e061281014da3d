"""EXPLAIN of a statement: a peek's finishing line above the operator tree
that the plan language's printer (expr/explain.py) draws."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from sqlglot import exp

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
from coordinator_lib.repr.relation import ColumnType
from coordinator_lib.sql.errors import UnsupportedFeature
from coordinator_lib.sql.plans import ExplainPlan, RowSetFinishing, SelectPlan
from coordinator_lib.sql.positions import position_of

__all__ = [
    "EXPLAIN_OPTIONS",
    "describe",
    "explain",
    "explain_options",
    "explain_plan",
    "format_aggregate",
    "format_finishing",
    "format_literal",
    "format_scalar",
]


# Materialize's EXPLAIN output modifiers Tidemark honours: each operator's
# line ends `// { arity: 2, types: "(integer, text?)" }` (`?`: nullable).
EXPLAIN_OPTIONS = ("arity", "types")


def explain_options(options: Sequence[exp.Var], stage: str | None) -> tuple[str, ...]:
    """The honoured modifiers of `EXPLAIN ... WITH (...)`, in EXPLAIN_OPTIONS'
    order; one set `= false` is left out. Any other modifier (Materialize's
    `join implementations`, `keys`, ...) is 0A000 naming it; the physical
    plan draws steps, not operators, so it takes none."""
    honoured: set[str] = set()
    for option in options:
        name = option.name
        if name not in EXPLAIN_OPTIONS or stage == "PHYSICAL":
            where = " with EXPLAIN PHYSICAL PLAN" if name in EXPLAIN_OPTIONS else ""
            raise UnsupportedFeature(
                f'EXPLAIN option "{name}" is not supported{where}'
                f" (Tidemark honours: {', '.join(EXPLAIN_OPTIONS)})",
                position_of(option),
            )
        if option.meta.get("value") not in ("false", "off"):
            honoured.add(name)
    return tuple(o for o in EXPLAIN_OPTIONS if o in honoured)


def _type_text(ty: ColumnType) -> str:
    name = "character varying" if ty.varchar else ty.scalar_type.value
    return name + ("?" if ty.nullable else "")


def _with_options(
    annotate: Callable[[RelationExpr], str] | None, options: tuple[str, ...]
) -> Callable[[RelationExpr], str] | None:
    """`annotate` followed by the `// { ... }` of the honoured options."""
    if not options:
        return annotate

    def mark(node: RelationExpr) -> str:
        parts = []
        if "arity" in options:
            parts.append(f"arity: {node.desc.arity}")
        if "types" in options:
            parts.append(f'types: "({", ".join(_type_text(t) for t in node.desc.types)})"')
        first = annotate(node) if annotate is not None else ""
        return f"{first} // {{ {', '.join(parts)} }}".lstrip()

    return mark


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
        text = explain(plan.expr, _with_options(annotate, plan.options), plan.names)
    if isinstance(plan.plan, SelectPlan):
        finish = format_finishing(plan.plan.finishing, plan.expr.desc.arity)
        if finish:
            text = finish + "\n" + "\n".join("  " + line for line in text.splitlines())
    return text
