"""Aggregates beyond count/sum/avg/min/max (`sql/query.py` plans those):

- bool_and / bool_or: lowered to min / max of the argument as an integer
  (1 or 0), compared with 1 above the Reduce, so they are maintained by the
  MIN/MAX rules (touched groups recomputed) and need no engine support;
  NULL for a group without non-NULL values, as in PostgreSQL.
- string_agg(text, separator): `AggregateFunc.STRING_AGG`, with a constant
  separator. The values are joined in ascending order (PostgreSQL leaves the
  order unspecified without ORDER BY; sorting makes it the same on both
  engines and across steps), or in the order of `ORDER BY <the argument>
  [ASC | DESC]`. It is not an accumulable aggregate: a view recomputes the
  touched groups (`compute/accumulate.py` takes only count and sum).
- array_agg is refused with a hint: Tidemark has no array type, and the
  text form '{a,b}' typed as text would not be array_agg.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot import exp

from coordinator_lib.expr.relation import AggregateExpr, AggregateFunc
from coordinator_lib.expr.scalar import (
    BinaryFunc,
    CallBinary,
    Cast,
    Column,
    If,
    Literal,
    Record,
)
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.errors import UnsupportedFeature
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.scalar import Typed, finalize, null_of

if TYPE_CHECKING:
    from coordinator_lib.expr.scalar import ScalarExpr
    from coordinator_lib.sql.scalar import ScalarBinder

S = ScalarType
EXTRA_AGGREGATES = (exp.LogicalAnd, exp.LogicalOr, exp.GroupConcat, exp.ArrayAgg)
# What `_AggregatePlan.calls` records: (kind, aggregate indexes, result type).
Call = tuple[str, tuple[int, ...], ScalarType | None]


def _argument(call: exp.Expr) -> tuple[exp.Expr, bool, exp.Ordered | None]:
    """The argument node, DISTINCT, and the ORDER BY key (at most one)."""
    node = call.this
    order: exp.Ordered | None = None
    if isinstance(node, exp.Order):
        keys = node.expressions
        if len(keys) != 1:
            raise UnsupportedFeature(
                "ORDER BY in an aggregate takes one key (the argument)", position_of(node)
            )
        order = keys[0]
        node = node.this
    distinct = isinstance(node, exp.Distinct)
    if distinct:
        if len(node.expressions) != 1:
            raise UnsupportedFeature(
                "DISTINCT in this aggregate takes one argument", position_of(call)
            )
        node = node.expressions[0]
    return node, distinct, order


def plan_extra_aggregate(
    call: exp.Expr,
    binder: ScalarBinder,
    index: Callable[[AggregateExpr], int],
    condition: Typed | None,
) -> Call:
    """Plan one call of EXTRA_AGGREGATES; `index` adds an AggregateExpr to the
    Reduce and returns its position; `condition` is a FILTER (WHERE ...)."""
    name = {
        exp.LogicalAnd: "bool_and",
        exp.LogicalOr: "bool_or",
        exp.GroupConcat: "string_agg",
        exp.ArrayAgg: "array_agg",
    }[type(call)]
    if isinstance(call, exp.ArrayAgg):
        return _plan_array_agg(call, binder, index, condition)
    arg_node, distinct, order = _argument(call)
    value = finalize(binder.bind(arg_node))

    def filtered(expr: ScalarExpr, st: ScalarType) -> ScalarExpr:
        if condition is None:
            return expr
        return If(condition.expr, expr, null_of(st))

    if isinstance(call, exp.LogicalAnd | exp.LogicalOr):
        if order is not None:
            raise UnsupportedFeature(f"{name}(... ORDER BY) is not supported", position_of(call))
        if value.scalar is not S.BOOLEAN:
            raise binder.no_function(call, name, [value])
        as_int = filtered(Cast(value.expr, S.INTEGER), S.INTEGER)
        func = AggregateFunc.MIN if isinstance(call, exp.LogicalAnd) else AggregateFunc.MAX
        return ("bool", (index(AggregateExpr(func, as_int, distinct)),), S.BOOLEAN)
    separator_node = call.args.get("separator")
    if separator_node is None:
        raise binder.no_function(call, name, [value])
    separator = binder.bind(separator_node)
    if value.scalar is not S.TEXT:
        raise binder.no_function(call, name, [value, separator])
    if not isinstance(separator.expr, Literal) or (
        not separator.unknown and separator.scalar is not S.TEXT
    ):
        raise UnsupportedFeature(
            "string_agg needs a constant text separator", position_of(separator_node)
        )
    descending = False
    if order is not None:
        if binder.bind(order.this).expr != value.expr:
            raise UnsupportedFeature(
                "string_agg(... ORDER BY) is supported by the aggregated value only",
                position_of(order),
            )
        descending = bool(order.args.get("desc"))
    text = separator.expr.value
    if text is None:  # a NULL separator: PostgreSQL joins with nothing
        text = ""
    agg = AggregateExpr(
        AggregateFunc.STRING_AGG,
        filtered(value.expr, S.TEXT),
        distinct,
        separator=text,
        descending=descending,
    )
    return ("plain", (index(agg),), None)


def _plan_array_agg(
    call: exp.ArrayAgg,
    binder: ScalarBinder,
    index: Callable[[AggregateExpr], int],
    condition: Typed | None,
) -> Call:
    """array_agg(value [ORDER BY key [ASC | DESC] [NULLS FIRST | LAST], ...])
    [FILTER (WHERE ...)]: a Record of the value and the keys, NULL for the
    rows FILTER leaves out."""
    node = call.this
    keys: list[exp.Ordered] = []
    if isinstance(node, exp.Order):
        keys = list(node.expressions)
        node = node.this
    if isinstance(node, exp.Distinct):
        raise UnsupportedFeature("array_agg(DISTINCT ...) is not supported", position_of(call))
    if node is None or call.expressions:
        raise binder.no_function(call, "array_agg", [])
    value = finalize(binder.bind(node))
    if value.scalar.is_array:
        raise UnsupportedFeature(
            "array_agg of an array (a two-dimensional array) is not supported",
            position_of(node),
        )
    fields: list[ScalarExpr] = [value.expr]
    order: list[tuple[bool, bool]] = []
    for key in keys:
        bound = finalize(binder.bind(key.this))
        if bound.scalar.is_array:
            raise UnsupportedFeature(
                "array_agg(... ORDER BY an array) is not supported", position_of(key)
            )
        descending = bool(key.args.get("desc"))
        nulls_first = key.args.get("nulls_first")
        # PostgreSQL: NULLs sort as larger than every value unless told.
        order.append((descending, descending if nulls_first is None else bool(nulls_first)))
        fields.append(bound.expr)
    record: ScalarExpr = Record(tuple(fields))
    if condition is not None:
        record = If(condition.expr, record, null_of(value.scalar))
    agg = AggregateExpr(AggregateFunc.ARRAY_AGG, record, order=tuple(order))
    return ("plain", (index(agg),), None)


def bool_result(column: int) -> ScalarExpr:
    """bool_and / bool_or above the Reduce: the min / max integer is 1."""
    return CallBinary(BinaryFunc.EQ, Column(column), Literal(1, ColumnType(S.INTEGER, False)))


__all__ = ["EXTRA_AGGREGATES", "bool_result", "plan_extra_aggregate"]
