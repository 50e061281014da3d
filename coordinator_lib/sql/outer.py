"""Planner-internal scalar nodes for subqueries, and walks over scalars.

While a subquery is planned, a name the subquery's own FROM clause does not
have resolves in the enclosing query (PostgreSQL's rule) to an `OuterColumn`.
A subquery used as a value is bound to a `SubqueryExpr` placeholder. Neither
ever reaches the compute layer: `sql/subquery.py` lowers placeholders into
joins, and `sql/decorrelate.py` turns outer columns into ordinary ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from coordinator_lib.expr.relation import (
    Filter,
    FlatMap,
    Join,
    Map,
    Reduce,
    RelationExpr,
)
from coordinator_lib.expr.scalar import ScalarExpr
from coordinator_lib.repr.relation import ColumnType


@dataclass(frozen=True)
class OuterColumn(ScalarExpr):
    """Column `index` of the relation `depth` query levels out (1: the query
    directly enclosing the subquery this expression belongs to)."""

    depth: int
    index: int
    type: ColumnType

    def typ(self, column_types: tuple[ColumnType, ...]) -> ColumnType:
        return self.type

    def __repr__(self) -> str:
        return f"outer{self.depth}#{self.index}"


class SubqueryKind(StrEnum):
    SCALAR = "scalar"  # the single value of its single column, NULL if no row
    EXISTS = "exists"  # whether it has a row
    ANY = "any"  # its one boolean column: TRUE if any row is, else NULL if any is, else FALSE


@dataclass(frozen=True, eq=False)
class SubqueryExpr(ScalarExpr):
    """A subquery used as a value, until lowering replaces it by a column.

    `plan` may read the enclosing relation's column i as OuterColumn(1, i),
    and `args[j]` (an expression over the enclosing relation, e.g. the left
    side of IN) as OuterColumn(1, base + j); `base` is the enclosing
    relation's arity when this was bound. Identity is the object: two
    occurrences of the same text are two subqueries."""

    kind: SubqueryKind
    plan: RelationExpr
    args: tuple[ScalarExpr, ...]
    base: int
    type: ColumnType

    def typ(self, column_types: tuple[ColumnType, ...]) -> ColumnType:
        return self.type

    def children(self) -> tuple[ScalarExpr, ...]:
        return self.args

    def __repr__(self) -> str:
        return f"{self.kind.value}_subquery({', '.join(map(repr, self.args))})"


def rewrite(expr: ScalarExpr, replace: Callable[[ScalarExpr], ScalarExpr | None]) -> ScalarExpr:
    """`expr` with every node for which `replace` returns an expression
    swapped for it (top down: a replaced node's children are not visited)."""
    new = replace(expr)
    if new is not None:
        return new
    changes: dict[str, object] = {}
    for f in dataclasses.fields(expr):  # type: ignore[arg-type]
        value = getattr(expr, f.name)
        if isinstance(value, ScalarExpr):
            child = rewrite(value, replace)
            if child is not value:
                changes[f.name] = child
        elif isinstance(value, tuple) and value and isinstance(value[0], ScalarExpr):
            items = tuple(rewrite(v, replace) for v in value)
            if any(a is not b for a, b in zip(items, value, strict=True)):
                changes[f.name] = items
    return dataclasses.replace(expr, **changes) if changes else expr  # type: ignore[type-var]


def shift_outer(plan: RelationExpr, by: int) -> RelationExpr:
    """`plan` used `by` query levels deeper than it was planned at (a WITH
    query named inside a subquery of the query that defines it): each
    reference to a column outside `plan` reaches `by` more levels out."""
    memo: dict[int, object] = {}

    def shift(value: object, level: int) -> object:
        if isinstance(value, OuterColumn):
            if value.depth <= level:
                return value
            return OuterColumn(value.depth + by, value.index, value.type)
        if isinstance(value, tuple):
            items = tuple(shift(v, level) for v in value)
            return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
        if not dataclasses.is_dataclass(value) or isinstance(value, type):
            return value
        key = id(value)
        if key in memo:
            return memo[key]
        inner = level + 1 if isinstance(value, SubqueryExpr) else level
        changes = {}
        for f in dataclasses.fields(value):
            old = getattr(value, f.name)
            new = shift(old, inner if f.name == "plan" else level)
            if new is not old:
                changes[f.name] = new
        memo[key] = dataclasses.replace(value, **changes) if changes else value
        return memo[key]

    if by == 0:
        return plan
    shifted = shift(plan, 0)
    assert isinstance(shifted, RelationExpr)
    return shifted


def walk(expr: ScalarExpr) -> Iterator[ScalarExpr]:
    """`expr` and every node below it (not into subquery plans)."""
    yield expr
    for child in expr.children():
        yield from walk(child)


def subqueries_in(expr: ScalarExpr) -> list[SubqueryExpr]:
    """The outermost subquery placeholders in `expr` (not those in their args)."""
    found: list[SubqueryExpr] = []

    def visit(node: ScalarExpr) -> None:
        if isinstance(node, SubqueryExpr):
            found.append(node)
            return
        for child in node.children():
            visit(child)

    visit(expr)
    return found


def has_subquery(expr: ScalarExpr) -> bool:
    return bool(subqueries_in(expr))


def has_outer(expr: ScalarExpr) -> bool:
    """Whether `expr` reads a column of an enclosing query."""
    return any(isinstance(node, OuterColumn) for node in walk(expr))


def node_scalars(node: RelationExpr) -> list[ScalarExpr]:
    """The scalar expressions one relation operator evaluates."""
    if isinstance(node, Filter):
        return list(node.predicates)
    if isinstance(node, Map):
        return list(node.scalars)
    if isinstance(node, FlatMap):
        return [e for call in node.calls for e in call.exprs]
    if isinstance(node, Join):
        return [e for cls in node.equivalences for e in cls]
    if isinstance(node, Reduce):
        return list(node.group_key) + [a.expr for a in node.aggregates]
    return []


def columns_read(expr: ScalarExpr) -> set[int]:
    """The columns of its relation `expr` reads, inside its subqueries too."""
    read = set(expr.columns())
    for sub in subqueries_in(expr):
        read |= {i for i in outer_columns(sub.plan) if i < sub.base}
        for arg in sub.args:
            read |= columns_read(arg)
    return read


def outer_columns(plan: RelationExpr) -> frozenset[int]:
    """The enclosing relation's columns (level 1) `plan` reads. Remembered
    on the (immutable) node: each level of nested subqueries asks again
    about everything below it, which was quadratic in the depth."""
    cached = plan.__dict__.get("_outer_columns")
    if cached is None:
        found = {
            n.index
            for scalar in node_scalars(plan)
            for n in walk(scalar)
            if isinstance(n, OuterColumn) and n.depth == 1
        }
        for child in plan.inputs():
            found |= outer_columns(child)
        cached = frozenset(found)
        plan.__dict__["_outer_columns"] = cached  # a cache, not a field
    return cached
