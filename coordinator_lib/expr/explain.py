"""EXPLAIN text in Materialize's style: one operator per line, inputs indented
below the operator that reads them, columns as `#i`.

    Reduce group_by=[#1] aggregates=[sum(#0), count(*)]
      Join on=(#0 = #3)
        Get materialize.public.t
        Get materialize.public.u

`annotate(node)` may return a suffix for a node's line; the compute layer
uses it to say which operators are maintained incrementally. The printer of
the plan language, below both sql/ (EXPLAIN of a statement: sql/explain.py)
and compute/ (EXPLAIN of a view's step plan: compute/explain.py).
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Mapping
from typing import Any

from coordinator_lib.expr.relation import (
    AggregateExpr,
    AggregateFunc,
    Constant,
    Distinct,
    Filter,
    FlatMap,
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
    Window,
)
from coordinator_lib.expr.scalar import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    Column,
    If,
    Literal,
    RaiseError,
    Record,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
)
from coordinator_lib.expr.temporal import TemporalFilter
from coordinator_lib.repr.global_id import GlobalId

_INFIX = {
    BinaryFunc.ADD: "+",
    BinaryFunc.SUB: "-",
    BinaryFunc.MUL: "*",
    BinaryFunc.DIV: "/",
    BinaryFunc.MOD: "%",
    BinaryFunc.EQ: "=",
    BinaryFunc.NOT_EQ: "!=",
    BinaryFunc.LT: "<",
    BinaryFunc.LTE: "<=",
    BinaryFunc.GT: ">",
    BinaryFunc.GTE: ">=",
    BinaryFunc.LIKE: "like",
    BinaryFunc.CONCAT: "||",
}
_POSTFIX = {
    UnaryFunc.IS_NULL: "IS NULL",
    UnaryFunc.IS_NOT_NULL: "IS NOT NULL",
    UnaryFunc.IS_TRUE: "IS TRUE",
    UnaryFunc.IS_FALSE: "IS FALSE",
}


def format_literal(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | decimal.Decimal):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    return repr(value)


def format_scalar(expr: ScalarExpr) -> str:
    """A scalar expression in EXPLAIN notation."""
    if isinstance(expr, Column):
        return f"#{expr.index}"
    if isinstance(expr, Literal):
        return format_literal(expr.value)
    if isinstance(expr, CallBinary):
        return f"({format_scalar(expr.left)} {_INFIX[expr.func]} {format_scalar(expr.right)})"
    if isinstance(expr, CallUnary):
        inner = format_scalar(expr.expr)
        if expr.func in _POSTFIX:
            return f"({inner}) {_POSTFIX[expr.func]}"
        if expr.func is UnaryFunc.NOT:
            return f"NOT({inner})"
        if expr.func is UnaryFunc.NEG:
            return f"-{inner}"
        return f"{expr.func.value}({inner})"
    if isinstance(expr, CallVariadic):
        parts = [format_scalar(e) for e in expr.exprs]
        if expr.func in (VariadicFunc.AND, VariadicFunc.OR):
            return "(" + f" {expr.func.value.upper()} ".join(parts) + ")"
        return f"{expr.func.value}({', '.join(parts)})"
    if isinstance(expr, If):
        return (
            f"case when {format_scalar(expr.cond)} then {format_scalar(expr.then)} "
            f"else {format_scalar(expr.els)} end"
        )
    if isinstance(expr, Cast):
        return f"{format_scalar(expr.expr)}::{expr.to.value}"
    if isinstance(expr, RaiseError):
        return f"error({format_literal(expr.message)})"
    return repr(expr)


def format_aggregate(agg: AggregateExpr) -> str:
    if (
        agg.func is AggregateFunc.COUNT
        and not agg.distinct
        and isinstance(agg.expr, Literal)
        and agg.expr.value is True
    ):
        return "count(*)"
    distinct = "distinct " if agg.distinct else ""
    if agg.func is AggregateFunc.ARRAY_AGG:
        expr, condition = agg.expr, ""
        if isinstance(expr, If) and isinstance(expr.then, Record):
            condition = f" filter (where {format_scalar(expr.cond)})"
            expr = expr.then
        fields = expr.fields if isinstance(expr, Record) else (expr,)
        keys = [
            f"{format_scalar(key)}{' desc' if desc else ''}"
            f"{' nulls first' if first else ' nulls last'}"
            for key, (desc, first) in zip(fields[1:], agg.order, strict=False)
        ]
        order = f" order by {', '.join(keys)}" if keys else ""
        return f"array_agg({format_scalar(fields[0])}{order}){condition}"
    return f"{agg.func.value}({distinct}{format_scalar(agg.expr)})"


def columns_list(indexes: tuple[int, ...] | list[int]) -> str:
    return ", ".join(f"#{i}" for i in indexes)


def describe(node: RelationExpr, names: Mapping[GlobalId, str] | None = None) -> str:
    """The one-line description of an operator (without its inputs)."""
    if isinstance(node, Get):
        return f"Get {(names or {}).get(node.id, str(node.id))}"
    if isinstance(node, Constant):
        return "Constant" if node.rows else "Constant <empty>"
    if isinstance(node, Project):
        return f"Project ({columns_list(node.outputs)})"
    if isinstance(node, Map):
        return f"Map ({', '.join(format_scalar(s) for s in node.scalars)})"
    if isinstance(node, FlatMap):
        ordinality = " with ordinality" if node.ordinality else ""
        calls = [
            f"{c.func.value}({', '.join(format_scalar(e) for e in c.exprs)})" for c in node.calls
        ]
        if node.zipped:  # zipped side by side, as PostgreSQL's ROWS FROM
            return f"FlatMap rows_from({', '.join(calls)}){ordinality}"
        return f"FlatMap {calls[0]}{ordinality}"
    if isinstance(node, Filter):
        return "Filter " + " AND ".join(format_scalar(p) for p in node.predicates)
    if isinstance(node, Join):
        if not node.equivalences:
            return "CrossJoin"
        classes = [" = ".join(format_scalar(e) for e in c) for c in node.equivalences]
        return f"Join on=({' AND '.join(classes)})"
    if isinstance(node, Reduce):
        parts = ["Reduce"]
        if node.group_key:
            parts.append(f"group_by=[{', '.join(format_scalar(k) for k in node.group_key)}]")
        if node.aggregates:
            parts.append(f"aggregates=[{', '.join(format_aggregate(a) for a in node.aggregates)}]")
        return " ".join(parts)
    if isinstance(node, Distinct):
        return "Distinct"
    if isinstance(node, Union):
        return "Union"
    if isinstance(node, Negate):
        return "Negate"
    if isinstance(node, Threshold):
        return "Threshold"
    if isinstance(node, TopK):
        parts = ["TopK"]
        if node.group_key:
            parts.append(f"group_by=[{columns_list(node.group_key)}]")
        if node.order_key:
            parts.append(f"order_by=[{', '.join(repr(k) for k in node.order_key)}]")
        if node.limit is not None:
            parts.append(f"limit={node.limit}")
        if node.offset:
            parts.append(f"offset={node.offset}")
        return " ".join(parts)
    if isinstance(node, Window):
        parts = ["Window"]
        if node.partition_key:
            parts.append(f"partition_by=[{columns_list(node.partition_key)}]")
        if node.order_key:
            parts.append(f"order_by=[{', '.join(repr(k) for k in node.order_key)}]")
        parts.append(f"functions=[{', '.join(repr(f) for f in node.functions)}]")
        return " ".join(parts)
    if isinstance(node, TemporalFilter):
        return "TemporalFilter " + " AND ".join(
            f"mz_now() {_INFIX[b.func]} {format_scalar(b.expr)}" for b in node.bounds
        )
    return type(node).__name__


def explain(
    expr: RelationExpr,
    annotate: Callable[[RelationExpr], str] | None = None,
    names: Mapping[GlobalId, str] | None = None,
) -> str:
    """The operator tree of `expr`, one operator per line, inputs indented by
    two spaces. `annotate(node)` adds a suffix to a line; `names` maps ids to
    readable names for Get lines."""
    lines: list[str] = []

    def visit(node: RelationExpr, depth: int) -> None:
        line = "  " * depth + describe(node, names)
        if annotate is not None:
            suffix = annotate(node)
            if suffix:
                line += " " + suffix
        lines.append(line)
        if isinstance(node, Constant):
            for row, diff in node.rows:
                values = ", ".join(format_literal(v) for v in row)
                shown = f"({values})" if diff == 1 else f"(({values}) x {diff})"
                lines.append("  " * (depth + 1) + "- " + shown)
        for child in node.inputs():
            visit(child, depth + 1)

    visit(expr, 0)
    return "\n".join(lines)
