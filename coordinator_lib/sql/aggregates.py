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
- array_agg(value [ORDER BY ...]): `AggregateFunc.ARRAY_AGG` over a Record
  of the value and the ORDER BY keys.
- stddev, stddev_samp, stddev_pop, variance, var_samp, var_pop: lowered to
  sum(x), sum(x * x) and count(x) (x as numeric, or double precision for
  floats) combined above the Reduce, as Materialize lowers them, so a view
  maintains them with the accumulable COUNT/SUM rule; the numerator
  n * sum(x * x) - sum(x)^2 is exact for numeric (floats: clamped at 0
  against rounding); NULL for no rows (and, sampled, for one row).
- jsonb_agg(value) and jsonb_object_agg(key, value): array_agg of the values
  (of the keys as text and of the values, both ordered by (key, value) so
  they pair up) turned into jsonb above the Reduce
  (`expr/functions/jsonb.py`), so they are maintained as array_agg is (the
  touched groups recomputed). The elements are in ascending order, as
  array_agg's without ORDER BY; jsonb_object_agg skips NULL keys and keeps
  the last value of a repeated key, as Materialize does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot import exp

from coordinator_lib.expr.functions import CallFunction
from coordinator_lib.expr.relation import AggregateExpr, AggregateFunc
from coordinator_lib.expr.scalar import (
    BinaryFunc,
    CallBinary,
    CallVariadic,
    Cast,
    Column,
    If,
    Literal,
    Record,
    VariadicFunc,
)
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.aggregate_syntax import JsonbAgg, JsonbObjectAgg, ListAgg, MapAgg
from coordinator_lib.sql.errors import InvalidColumnReference, UnsupportedFeature
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.scalar import (
    Typed,
    avg_result_type,
    check_aggregate_argument,
    finalize,
    null_of,
)

if TYPE_CHECKING:
    from coordinator_lib.expr.scalar import ScalarExpr
    from coordinator_lib.sql.scalar import ScalarBinder

S = ScalarType
# exp.Variance and exp.VariancePop include aggregate_syntax's VarSamp and VarPop.
VARIANCES: dict[type[exp.Expr], str] = {
    exp.Stddev: "stddev_samp",
    exp.StddevSamp: "stddev_samp",
    exp.StddevPop: "stddev_pop",
    exp.Variance: "var_samp",
    exp.VariancePop: "var_pop",
}
EXTRA_AGGREGATES: tuple[type[exp.Expr], ...] = (
    exp.LogicalAnd,
    exp.LogicalOr,
    exp.GroupConcat,
    exp.ArrayAgg,
    JsonbAgg,
    JsonbObjectAgg,
    *VARIANCES,
)
# What `_AggregatePlan.calls` records: (kind, aggregate indexes, the result
# type, or for string_agg_ordered its separator).
Call = tuple[str, tuple[int, ...], ScalarType | str | None]


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
    node, distinct = _unwrap_distinct(node, call)
    return node, distinct, order


def _unwrap_distinct(node: exp.Expr, call: exp.Expr) -> tuple[exp.Expr, bool]:
    """The argument under `DISTINCT x`, and whether it was there."""
    if not isinstance(node, exp.Distinct):
        return node, False
    if len(node.expressions) != 1:
        raise UnsupportedFeature("DISTINCT in this aggregate takes one argument", position_of(call))
    return node.expressions[0], True


def plan_extra_aggregate(
    call: exp.Expr,
    binder: ScalarBinder,
    index: Callable[[AggregateExpr], int],
    condition: Typed | None,
) -> Call:
    """Plan one call of EXTRA_AGGREGATES; `index` adds an AggregateExpr to the
    Reduce and returns its position; `condition` is a FILTER (WHERE ...)."""
    if isinstance(call, exp.ArrayAgg):
        return _plan_array_agg(call, binder, index, condition)
    if isinstance(call, tuple(VARIANCES)):
        return _plan_variance(call, binder, index, condition)
    if isinstance(call, JsonbAgg | JsonbObjectAgg):
        return _plan_jsonb_agg(call, binder, index, condition)
    if isinstance(call, exp.GroupConcat):
        return _plan_string_agg(call, binder, index, condition)
    name = "bool_and" if isinstance(call, exp.LogicalAnd) else "bool_or"
    arg_node, distinct, order = _argument(call)
    value = finalize(binder.bind(arg_node))

    def filtered(expr: ScalarExpr, st: ScalarType) -> ScalarExpr:
        if condition is None:
            return expr
        return If(condition.expr, expr, null_of(st))

    if order is not None:
        raise UnsupportedFeature(f"{name}(... ORDER BY) is not supported", position_of(call))
    if value.scalar is not S.BOOLEAN:
        raise binder.no_function(call, name, [value])
    as_int = filtered(Cast(value.expr, S.INTEGER), S.INTEGER)
    func = AggregateFunc.MIN if isinstance(call, exp.LogicalAnd) else AggregateFunc.MAX
    return ("bool", (index(AggregateExpr(func, as_int, distinct)),), S.BOOLEAN)


def _plan_string_agg(
    call: exp.GroupConcat,
    binder: ScalarBinder,
    index: Callable[[AggregateExpr], int],
    condition: Typed | None,
) -> Call:
    """string_agg(text, separator [ORDER BY ...]): STRING_AGG when ordered by
    nothing or by the value itself; ordered by anything else, array_agg of
    the value with the keys, joined above the Reduce (`string_agg_of_array`),
    so a view maintains it as array_agg (the touched groups recomputed)."""
    node = call.this
    keys: list[exp.Ordered] = []
    if isinstance(node, exp.Order):
        keys = list(node.expressions)
        node = node.this
    node, distinct = _unwrap_distinct(node, call)
    value = finalize(binder.bind(node))
    separator_node = call.args.get("separator")
    if separator_node is None:
        raise binder.no_function(call, "string_agg", [value])
    separator = binder.bind(separator_node)
    if value.scalar is not S.TEXT:
        raise binder.no_function(call, "string_agg", [value, separator])
    if not isinstance(separator.expr, Literal) or (
        not separator.unknown and separator.scalar is not S.TEXT
    ):
        raise UnsupportedFeature(
            "string_agg needs a constant text separator", position_of(separator_node)
        )
    text = separator.expr.value
    if text is None:  # a NULL separator: PostgreSQL joins with nothing
        text = ""
    by_value = len(keys) == 1 and binder.bind(keys[0].this).expr == value.expr
    if keys and not by_value:
        if distinct:
            raise InvalidColumnReference(
                "in an aggregate with DISTINCT, ORDER BY expressions must appear in argument list",
                position_of(keys[0]),
            )
        order_exprs, order = _order_keys(keys, binder, "string_agg")
        record: ScalarExpr = Record((value.expr, *order_exprs))
        if condition is not None:
            record = If(condition.expr, record, null_of(S.TEXT))
        values = index(AggregateExpr(AggregateFunc.ARRAY_AGG, record, order=order))
        return ("string_agg_ordered", (values,), text)
    expr = value.expr if condition is None else If(condition.expr, value.expr, null_of(S.TEXT))
    agg = AggregateExpr(
        AggregateFunc.STRING_AGG,
        expr,
        distinct,
        separator=text,
        descending=by_value and bool(keys[0].args.get("desc")),
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
    rows FILTER leaves out. list_agg is array_agg cast to a list above the
    Reduce (a list is held as an array is)."""
    name = "list_agg" if isinstance(call, ListAgg) else "array_agg"
    node = call.this
    keys: list[exp.Ordered] = []
    if isinstance(node, exp.Order):
        keys = list(node.expressions)
        node = node.this
    if isinstance(node, exp.Distinct):
        raise UnsupportedFeature(f"{name}(DISTINCT ...) is not supported", position_of(call))
    if node is None or call.expressions:
        raise binder.no_function(call, name, [])
    value = finalize(binder.bind(node))
    if value.scalar.element is not None:
        raise UnsupportedFeature(
            f"{name} of an array or list (two dimensions or layers) is not supported",
            position_of(node),
        )
    order_exprs, order = _order_keys(keys, binder, name)
    fields: list[ScalarExpr] = [value.expr, *order_exprs]
    record: ScalarExpr = Record(tuple(fields))
    if condition is not None:
        record = If(condition.expr, record, null_of(value.scalar))
    agg = AggregateExpr(AggregateFunc.ARRAY_AGG, record, order=tuple(order))
    if name == "list_agg":
        return ("list_agg", (index(agg),), value.scalar.list())
    return ("plain", (index(agg),), None)


def _order_keys(
    keys: list[exp.Ordered], binder: ScalarBinder, name: str
) -> tuple[list[ScalarExpr], tuple[tuple[bool, bool], ...]]:
    """An aggregate's ORDER BY: the key expressions and per key (descending, nulls_first)."""
    exprs: list[ScalarExpr] = []
    order: list[tuple[bool, bool]] = []
    for key in keys:
        bound = finalize(binder.bind(key.this))
        if bound.scalar.element is not None:
            raise UnsupportedFeature(
                f"{name}(... ORDER BY an array or list) is not supported", position_of(key)
            )
        descending = bool(key.args.get("desc"))
        nulls_first = key.args.get("nulls_first")
        # PostgreSQL: NULLs sort as larger than every value unless told.
        order.append((descending, descending if nulls_first is None else bool(nulls_first)))
        exprs.append(bound.expr)
    return exprs, tuple(order)


def _plan_variance(
    call: exp.Expr,
    binder: ScalarBinder,
    index: Callable[[AggregateExpr], int],
    condition: Typed | None,
) -> Call:
    """sum(x), sum(x * x), count(x) for one of VARIANCES (see the module docstring)."""
    kind = next(k for cls, k in VARIANCES.items() if isinstance(call, cls))
    name = call.sql_name().lower()
    node, distinct, order = _argument(call)
    if distinct or order is not None:
        raise UnsupportedFeature(
            f"{name}(DISTINCT ...) and {name}(... ORDER BY) are not supported", position_of(call)
        )
    value = check_aggregate_argument(name, binder.bind(node), node)
    result = avg_result_type(value.scalar)
    x = value.expr if value.scalar is result else Cast(value.expr, result)
    if condition is not None:
        x = If(condition.expr, x, null_of(result))
    total = index(AggregateExpr(AggregateFunc.SUM, x))
    squares = index(AggregateExpr(AggregateFunc.SUM, CallBinary(BinaryFunc.MUL, x, x)))
    count = index(AggregateExpr(AggregateFunc.COUNT, x))
    return (kind, (total, squares, count), result)


def _variance(kind: str, total: Column, squares: Column, count: Column, result: S) -> ScalarExpr:
    """var or stddev from sum(x), sum(x * x) and count(x), NULL for too few rows."""
    n = Cast(count, result)
    one = Literal(1, ColumnType(S.BIGINT, False))
    zero = Literal(0, ColumnType(result, False))
    mul, sub = BinaryFunc.MUL, BinaryFunc.SUB
    numerator = CallBinary(sub, CallBinary(mul, n, squares), CallBinary(mul, total, total))
    numerator = CallVariadic(VariadicFunc.GREATEST, (numerator, zero))
    sampled = kind.endswith("_samp")
    denominator = CallBinary(
        mul, n, CallBinary(sub, n, Literal(1, ColumnType(result, False))) if sampled else n
    )
    variance: ScalarExpr = CallBinary(BinaryFunc.DIV, numerator, denominator)
    if kind.startswith("stddev"):
        variance = CallFunction("sqrt", (variance,), ColumnType(result, True))
    too_few = CallBinary(BinaryFunc.LTE if sampled else BinaryFunc.LT, count, one)
    return If(too_few, null_of(result), variance)


def _plan_jsonb_agg(
    call: exp.Expr,
    binder: ScalarBinder,
    index: Callable[[AggregateExpr], int],
    condition: Typed | None,
) -> Call:
    """array_agg of the values (and of the keys) for jsonb_agg / jsonb_object_agg,
    ordered by the ORDER BY keys then by (key, value)."""
    name = call.sql_name().lower()
    node = call.this
    keys: list[exp.Ordered] = []
    if isinstance(node, exp.Order):
        keys = list(node.expressions)
        node = node.this
    if isinstance(node, exp.Distinct):
        raise UnsupportedFeature(f"{name}(DISTINCT ...) is not supported", position_of(call))
    fields = [finalize(binder.bind(node))]
    map_type: ScalarType | None = None
    if isinstance(call, JsonbObjectAgg):  # keys as text, then the values
        value_node = call.expression
        if isinstance(value_node, exp.Order):  # jsonb_object_agg(k, v ORDER BY ...)
            keys = list(value_node.expressions)
            value_node = value_node.this
        key = fields[0]
        text = ColumnType(S.TEXT, key.type.nullable)
        fields = [Typed(Cast(key.expr, S.TEXT), text), finalize(binder.bind(value_node))]
        if isinstance(call, MapAgg):  # the values as the map holds them, text
            value_type = fields[1].scalar
            try:
                map_type = value_type.map_of()
            except ValueError:
                raise UnsupportedFeature(
                    f"map_agg of {value_type.value} values is not supported",
                    position_of(value_node),
                ) from None
            entry = CallFunction(
                "map_entry_text",
                (fields[1].expr, Literal(value_type.value, ColumnType(S.TEXT, False))),
                ColumnType(S.TEXT, fields[1].type.nullable),
            )
            fields[1] = Typed(entry, entry.type)
    if any(f.scalar.element is not None for f in fields):
        raise UnsupportedFeature(f"{name} of an array is not supported", position_of(call))
    order_exprs, order = _order_keys(keys, binder, name)
    if len(fields) > 1:
        order_exprs += [f.expr for f in fields]
        order += ((False, False),) * len(fields)
    columns: list[int] = []
    for field in fields:
        record: ScalarExpr = Record((field.expr, *order_exprs))
        if condition is not None:
            record = If(condition.expr, record, null_of(field.scalar))
        columns.append(index(AggregateExpr(AggregateFunc.ARRAY_AGG, record, order=order)))
    return (name, tuple(columns), map_type)


def plan_interval_sum(
    call: exp.Sum | exp.Avg,
    value: Typed,
    index: Callable[[AggregateExpr], int],
    condition: Typed | None,
    distinct: bool,
) -> Call:
    """sum / avg of an interval: the sums of its months, days and
    microseconds apart, and the count, so a view maintains them with the
    accumulable COUNT/SUM rule. Above the Reduce the sums become one
    interval; avg divides it by the count as PostgreSQL's interval_avg
    (interval_div: fractions of months cascade to days, of days to time).
    DISTINCT collects the values (array_agg) and keeps one per
    interval_cmp key above the Reduce: equal intervals ('1 mon', '30
    days') count once, as the greatest, the value their group prints."""
    name = call.sql_name().lower()
    arg = value.expr
    if condition is not None:
        arg = If(condition.expr, arg, null_of(S.INTERVAL))
    if distinct:
        values = index(AggregateExpr(AggregateFunc.ARRAY_AGG, Record((arg,)), order=()))
        return (f"interval_{name}_distinct", (values,), S.INTERVAL)
    bigint = ColumnType(S.BIGINT, True)
    columns = tuple(
        index(AggregateExpr(AggregateFunc.SUM, CallFunction(field, (arg,), bigint)))
        for field in ("interval_months", "interval_days", "interval_micros")
    )
    count = index(AggregateExpr(AggregateFunc.COUNT, arg))
    return (f"interval_{name}", (*columns, count), S.INTERVAL)


def _interval_sum(kind: str, columns: tuple[int, ...]) -> ScalarExpr:
    interval = ColumnType(S.INTERVAL, True)
    if kind.endswith("_distinct"):  # interval_sum_distinct / interval_avg_distinct
        return CallFunction(kind, (Column(columns[0]),), interval)
    months, days, micros, count = map(Column, columns)
    total = CallFunction("interval_of_sums", (months, days, micros), interval)
    if kind == "interval_sum":
        return total
    return CallFunction("interval_div", (total, Cast(count, S.DOUBLE)), interval)


def bool_result(column: int) -> ScalarExpr:
    """bool_and / bool_or above the Reduce: the min / max integer is 1."""
    return CallBinary(BinaryFunc.EQ, Column(column), Literal(1, ColumnType(S.INTEGER, False)))


def extra_result(
    kind: str, columns: tuple[int, ...], types: tuple[ColumnType, ...], result: S | str | None
) -> ScalarExpr:
    """An aggregate of plan_extra_aggregate's `kind` above the Reduce, from
    the Reduce's output `columns` (`types`: the Reduce's output types)."""
    if kind == "bool":
        return bool_result(columns[0])
    if kind == "list_agg":
        assert isinstance(result, S)
        return Cast(Column(columns[0]), result)
    if kind == "string_agg_ordered":
        assert isinstance(result, str)
        separator = Literal(result, ColumnType(S.TEXT, False))
        return CallFunction(
            "string_agg_of_array", (Column(columns[0]), separator), ColumnType(S.TEXT, True)
        )
    if kind.startswith(("interval_sum", "interval_avg")):
        return _interval_sum(kind, columns)
    if kind in VARIANCES.values():
        assert isinstance(result, S)
        total, squares, count = map(Column, columns)
        return _variance(kind, total, squares, count, result)
    if kind == "map_agg":
        assert isinstance(result, S)
        return CallFunction("map_of_entries", tuple(map(Column, columns)), ColumnType(result))
    jsonb = ColumnType(S.JSONB, True)
    if kind == "jsonb_agg":
        elements = types[columns[0]].scalar_type.element
        function = "jsonb_agg_of_jsonb" if elements is S.JSONB else "jsonb_agg_of_values"
        return CallFunction(function, (Column(columns[0]),), jsonb)
    values = types[columns[1]].scalar_type.element
    function = "jsonb_object_agg_of_jsonb" if values is S.JSONB else "jsonb_object_agg_of_values"
    return CallFunction(function, tuple(map(Column, columns)), jsonb)


__all__ = ["EXTRA_AGGREGATES", "Call", "extra_result", "plan_extra_aggregate", "plan_interval_sum"]
