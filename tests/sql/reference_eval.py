"""A tiny pure-Python evaluator of RelationExpr over in-memory rows, with
PostgreSQL semantics (three-valued logic, NULL-strict operators, integer
division truncating toward zero, overflow and division by zero as errors,
lazy CASE). A test oracle only: slow, obvious, no optimizations.

`evaluate(expr, tables)` returns the result as a consolidated multiset
(`Counter` of row -> multiplicity); `finish(rows, finishing)` applies a
SelectPlan's ORDER BY / LIMIT / OFFSET / projection.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from coordinator_lib.adapter.finishing import finish_rows
from coordinator_lib.compute.local_ordered import topk_rows
from coordinator_lib.compute.local_scalar import EvalError, aggregate_values, eval_scalar
from coordinator_lib.expr.relation import (
    Constant,
    Distinct,
    Filter,
    Get,
    Join,
    Map,
    Negate,
    Project,
    Reduce,
    RelationExpr,
    Threshold,
    TopK,
    Union,
)
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.sql.plans import RowSetFinishing

S = ScalarType
Row = tuple[Any, ...]
_aggregate = aggregate_values
__all__ = ["EvalError", "evaluate", "finish"]


def evaluate(expr: RelationExpr, tables: Mapping[GlobalId, list[Row]]) -> Counter[Row]:
    """The multiset `expr` denotes when each Get reads `tables[id]`."""
    if isinstance(expr, Get):
        return Counter(tuple(r) for r in tables[expr.id])
    if isinstance(expr, Constant):
        out: Counter[Row] = Counter()
        for row, diff in expr.rows:
            out[tuple(row)] += diff
        return _consolidate(out)
    if isinstance(expr, Project):
        out = Counter()
        for row, count in evaluate(expr.input, tables).items():
            out[tuple(row[i] for i in expr.outputs)] += count
        return _consolidate(out)
    if isinstance(expr, Map):
        all_types = expr.desc.types  # input columns, then one per scalar
        out = Counter()
        for row, count in evaluate(expr.input, tables).items():
            extended = list(row)
            for scalar in expr.scalars:
                value = eval_scalar(scalar, tuple(extended), all_types[: len(extended)])
                extended.append(value)
            out[tuple(extended)] += count
        return out
    if isinstance(expr, Filter):
        types = expr.input.desc.types
        return Counter(
            {
                row: count
                for row, count in evaluate(expr.input, tables).items()
                if all(eval_scalar(p, row, types) is True for p in expr.predicates)
            }
        )
    if isinstance(expr, Join):
        product: Counter[Row] = Counter({(): 1})
        for child in expr.inputs_:
            rows = evaluate(child, tables)
            product = Counter(
                {a + b: ca * cb for a, ca in product.items() for b, cb in rows.items()}
            )
        types = expr.desc.types
        out = Counter()
        for row, count in product.items():
            keep = True
            for klass in expr.equivalences:
                values = [eval_scalar(e, row, types) for e in klass]
                if any(v is None for v in values) or any(v != values[0] for v in values):
                    keep = False
                    break
            if keep:
                out[row] += count
        return _consolidate(out)
    if isinstance(expr, Reduce):
        types = expr.input.desc.types
        groups: dict[Row, list[tuple[Row, int]]] = {}
        for row, count in evaluate(expr.input, tables).items():
            if count < 0:
                raise AssertionError(f"Reduce input has a negative count: {row} x {count}")
            key = tuple(eval_scalar(k, row, types) for k in expr.group_key)
            groups.setdefault(key, []).append((row, count))
        out = Counter()
        for key, rows in groups.items():
            out[key + tuple(_aggregate(a, rows, types) for a in expr.aggregates)] += 1
        return out
    if isinstance(expr, Distinct):
        rows = evaluate(expr.input, tables)
        if any(c < 0 for c in rows.values()):
            raise AssertionError("Distinct input has a negative count")
        return Counter({row: 1 for row, count in rows.items() if count > 0})
    if isinstance(expr, Union):
        out = Counter()
        for child in expr.inputs_:
            for row, count in evaluate(child, tables).items():
                out[row] += count
        return _consolidate(out)
    if isinstance(expr, Negate):
        return Counter({row: -count for row, count in evaluate(expr.input, tables).items()})
    if isinstance(expr, Threshold):
        return Counter({row: c for row, c in evaluate(expr.input, tables).items() if c > 0})
    if isinstance(expr, TopK):  # per group: compute's cut, itself held to DuckDB here
        by_key: dict[Row, list[tuple[Row, int]]] = {}
        for row, count in evaluate(expr.input, tables).items():
            if count < 0:
                raise AssertionError("TopK input has a negative count")
            by_key.setdefault(tuple(row[c] for c in expr.group_key), []).append((row, count))
        return Counter({row: c for rows in by_key.values() for row, c in topk_rows(expr, rows)})
    raise TypeError(f"the reference evaluator has no rule for {type(expr).__name__}")


def _consolidate(rows: Counter[Row]) -> Counter[Row]:
    return Counter({row: count for row, count in rows.items() if count != 0})


def finish(rows: Counter[Row], finishing: RowSetFinishing) -> list[Row]:
    """Sort, offset, limit and project a result like a peek's finishing does
    (the product's finishing: test_reference_duckdb checks it against DuckDB)."""
    if any(count < 0 for count in rows.values()):
        raise AssertionError(f"result has a negative count: {rows}")
    return finish_rows(rows.items(), finishing)
