"""Column lineage: which input columns each output column of a relation
expression is computed from (the Dagster code location shows it per
asset). It reads only the plan language, so it lives beside it."""

from __future__ import annotations

from coordinator_lib.expr import relation as rel
from coordinator_lib.repr.global_id import GlobalId


def column_lineage(expr: rel.RelationExpr) -> list[frozenset[tuple[GlobalId, int]]]:
    """For each output column of `expr`, the (collection, column) pairs its
    values are computed from (filters and join conditions are not counted)."""
    if isinstance(expr, rel.Get):
        return [frozenset({(expr.id, i)}) for i in range(expr.desc.arity)]
    if isinstance(expr, rel.Constant):
        return [frozenset() for _ in range(expr.desc.arity)]
    if isinstance(expr, rel.Project):
        below = column_lineage(expr.input)
        return [below[i] for i in expr.outputs]
    if isinstance(expr, rel.Map):
        columns = column_lineage(expr.input)
        for scalar in expr.scalars:  # a scalar may read earlier scalars
            columns.append(frozenset().union(*(columns[c] for c in scalar.columns())))
        return columns
    if isinstance(expr, rel.Join):
        return [c for child in expr.inputs_ for c in column_lineage(child)]
    if isinstance(expr, rel.Reduce):
        below = column_lineage(expr.input)
        scalars = [*expr.group_key, *(a.expr for a in expr.aggregates)]
        return [frozenset().union(*(below[c] for c in s.columns())) for s in scalars]
    if isinstance(expr, rel.Window):  # a function's value: its arguments, partition and order
        below = column_lineage(expr.input)
        spec = [*expr.partition_key, *(k.column for k in expr.order_key)]
        return below + [
            frozenset().union(*(below[c] for c in [*spec, *f.args])) for f in expr.functions
        ]
    if isinstance(expr, rel.Union):
        parts = [column_lineage(child) for child in expr.inputs_]
        return [frozenset().union(*column) for column in zip(*parts, strict=True)]
    inputs = expr.inputs()
    if len(inputs) == 1 and inputs[0].desc.arity == expr.desc.arity:  # Filter, Distinct, ...
        return column_lineage(inputs[0])
    every = frozenset().union(*(c for child in inputs for c in column_lineage(child)))
    return [every for _ in range(expr.desc.arity)]


__all__ = ["column_lineage"]
