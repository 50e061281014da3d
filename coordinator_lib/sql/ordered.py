"""Window functions in a SELECT list or ORDER BY, planned as Window
operators (expr/relation.py) over the query's rows after WHERE, GROUP BY and
HAVING, as PostgreSQL evaluates them.

    SELECT k, v, rank() OVER (PARTITION BY k ORDER BY v) FROM t

becomes `Window partition=[#0] order=[#1] [rank()]` over t, and the select
list reads the new column. The arguments, PARTITION BY and ORDER BY
expressions are computed by one Map below the Window operators (one per
distinct OVER clause, stacked); avg is sum / count, as for GROUP BY.
Each framed function (aggregates, first/last/nth_value) carries its frame:
ROWS or RANGE with UNBOUNDED, CURRENT ROW or integer offsets (RANGE offsets
on one numeric ORDER BY column), PostgreSQL's default frame when none is
given; GROUPS and EXCLUDE are refused (0A000). string_agg, array_agg and
bool_and/bool_or are planned as GROUP BY plans them (sql/aggregates.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from sqlglot import exp

from coordinator_lib.expr.relation import (
    DEFAULT_FRAME,
    FRAMED,
    AggregateExpr,
    Frame,
    FrameMode,
    Map,
    OrderKey,
    Project,
    RelationExpr,
    Window,
    WindowExpr,
    WindowFunc,
)
from coordinator_lib.expr.scalar import (
    BinaryFunc,
    CallBinary,
    Cast,
    Column,
    If,
    Literal,
    Record,
    ScalarExpr,
    is_integer,
    is_numeric,
)
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql import interval_keys
from coordinator_lib.sql.aggregate_syntax import JsonbAgg, JsonbObjectAgg
from coordinator_lib.sql.aggregates import (
    EXTRA_AGGREGATES,
    extra_result,
    plan_extra_aggregate,
    plan_interval_sum,
)
from coordinator_lib.sql.errors import InvalidColumnReference, SqlError, UnsupportedFeature
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.scalar import (
    ScalarBinder,
    Typed,
    avg_result_type,
    check_aggregate_argument,
    finalize,
    null_of,
)
from coordinator_lib.sql.subquery import lower_subqueries

S = ScalarType


class WindowingError(SqlError):
    """A window function where none is allowed, or nested (42P20)."""

    code = "42P20"


class NthValueError(SqlError):
    """nth_value's n below 1 (PostgreSQL's 22016)."""

    code = "22016"


def _is_subquery(node: exp.Expr) -> bool:
    return isinstance(node, exp.Query | exp.Exists)


def windows_in(node: exp.Expr) -> list[exp.Window]:
    """The window function calls in `node`, outermost only, not in subqueries."""
    found: list[exp.Window] = []

    def visit(n: exp.Expr) -> None:
        if isinstance(n, exp.Window):
            found.append(n)
            return
        if _is_subquery(n):
            return
        for child in n.iter_expressions():
            visit(child)

    visit(node)
    return found


def check_no_windows(node: exp.Expr | None, clause: str) -> None:
    """PostgreSQL's 42P20 for a window function in WHERE, GROUP BY, HAVING, ..."""
    if node is None:
        return
    found = windows_in(node)
    if found:
        raise WindowingError(f"window functions are not allowed in {clause}", position_of(found[0]))


class WindowBinder(ScalarBinder):
    """A binder for the select list and ORDER BY that reads each window
    call's value from the column the Window operators added."""

    def __init__(
        self, base: ScalarBinder, types: tuple[ColumnType, ...], values: dict[int, Typed]
    ) -> None:
        super().__init__(base.scope, base.clause, types=types, grouping=base.grouping)
        self.values = values

    def bind(self, node: exp.Expr) -> Typed:
        hit = self.values.get(id(node))
        if hit is not None:
            return hit
        if self.grouping is not None and windows_in(node):
            # Not a group key as a whole: bind its parts (the window calls among them).
            return self._handler(node)(node)
        return super().bind(node)


_RANKING = {
    exp.RowNumber: WindowFunc.ROW_NUMBER,
    exp.Rank: WindowFunc.RANK,
    exp.DenseRank: WindowFunc.DENSE_RANK,
}
_VALUE = {
    exp.FirstValue: WindowFunc.FIRST_VALUE,
    exp.LastValue: WindowFunc.LAST_VALUE,
}
_AGGREGATES = {
    exp.Count: WindowFunc.COUNT,
    exp.Sum: WindowFunc.SUM,
    exp.Min: WindowFunc.MIN,
    exp.Max: WindowFunc.MAX,
}


def _order_direction(ordered: exp.Ordered) -> tuple[bool, bool]:
    desc = bool(ordered.args.get("desc"))
    nulls_first = ordered.args.get("nulls_first")
    nulls_last = desc is False if nulls_first is None else not nulls_first
    return desc, nulls_last


class FrameOffsetError(SqlError):
    """A negative frame offset (PostgreSQL's 22013)."""

    code = "22013"


def _frame_offset(node: exp.Expr, mode: FrameMode) -> int:
    """A frame bound's `n` of n PRECEDING / FOLLOWING: an integer constant."""
    if node.find(exp.Column) is not None:
        raise InvalidColumnReference(
            f"argument of {mode.value.upper()} must not contain variables", position_of(node)
        )
    value, sign = node, 1
    if isinstance(value, exp.Neg):
        value, sign = value.this, -1
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        if sign < 0 and int(value.this):
            raise FrameOffsetError("frame offset must not be negative", position_of(node))
        return int(value.this)
    raise UnsupportedFeature(
        f"{mode.value.upper()} frame offsets other than integer constants are not supported",
        position_of(node),
    )


def _frame_bound(window: exp.Window, which: str, mode: FrameMode) -> int | None:
    """One bound as Frame holds it: None for UNBOUNDED, else signed rows or
    distance (negative for PRECEDING)."""
    spec = window.args["spec"]
    bound = spec.args.get(which)
    side = str(spec.args.get(f"{which}_side") or "").upper()
    if bound is None:  # a frame given by its start only ends at the current row
        return 0
    if isinstance(bound, str):
        word = bound.upper()
        if word == "CURRENT ROW":
            return 0
        if word == "UNBOUNDED":
            if (which == "start") == (side == "FOLLOWING"):
                edge = "start" if which == "start" else "end"
                raise WindowingError(
                    f"frame {edge} cannot be UNBOUNDED {side}",
                    position_of(spec) or position_of(window),
                )
            return None
        raise UnsupportedFeature(f"window frame bound {bound} is not supported", position_of(spec))
    n = _frame_offset(bound, mode)
    return -n if side == "PRECEDING" else n


def _bound_as_written(spec: exp.WindowSpec, which: str) -> str:
    """UNBOUNDED, CURRENT ROW, or the side of an offset (PRECEDING / FOLLOWING)."""
    bound = spec.args.get(which)
    if bound is None:  # `ROWS n PRECEDING`: the frame ends at the current row
        return "CURRENT ROW"
    if isinstance(bound, str):
        return "CURRENT ROW" if bound.upper() == "CURRENT ROW" else "UNBOUNDED"
    return str(spec.args.get(f"{which}_side") or "").upper()


def _frame(window: exp.Window, order_key: list[OrderKey], order_types: list[ScalarType]) -> Frame:
    """The call's frame (PostgreSQL's default without one); GROUPS and
    EXCLUDE are refused with 0A000."""
    spec = window.args.get("spec")
    if spec is None:
        return DEFAULT_FRAME
    kind = str(spec.args.get("kind") or "").upper()
    if kind not in ("ROWS", "RANGE"):  # Materialize's words: GROUPS is not built
        raise UnsupportedFeature(
            f"{kind or 'this'} in window frames not yet supported (only ROWS and RANGE)",
            position_of(spec) or position_of(window),
        )
    exclude = spec.args.get("exclude")
    excluded = exclude.this if isinstance(exclude, exp.Var) else exclude
    if exclude is not None and str(excluded).upper() != "NO OTHERS":
        raise UnsupportedFeature(
            "EXCLUDE in window frames is not supported", position_of(spec) or position_of(window)
        )
    mode = FrameMode(kind.lower())
    start, end = _frame_bound(window, "start", mode), _frame_bound(window, "end", mode)
    # As PostgreSQL checks them, by the bounds as written: `0 PRECEDING` and
    # `0 FOLLOWING` are offsets (a frame may end before it starts: empty),
    # only CURRENT ROW and offset PRECEDING ends are refused after a start.
    first, last = _bound_as_written(spec, "start"), _bound_as_written(spec, "end")
    if first == "FOLLOWING" and last in ("CURRENT ROW", "PRECEDING"):
        raise WindowingError(
            "frame starting from following row cannot have preceding rows", position_of(spec)
        )
    if first == "CURRENT ROW" and last == "PRECEDING":
        raise WindowingError(
            "frame starting from current row cannot have preceding rows", position_of(spec)
        )
    offsets = any(b not in (None, 0) for b in (start, end))
    if mode is FrameMode.RANGE and start is not None and end is not None and start > end:
        raise UnsupportedFeature(
            "RANGE frames that end before they start are not supported", position_of(spec)
        )
    if mode is FrameMode.RANGE and offsets:
        if len(order_key) != 1:
            raise WindowingError(
                "RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY column",
                position_of(spec),
            )
        if not is_numeric(order_types[0]):
            raise UnsupportedFeature(
                f"RANGE with offset PRECEDING/FOLLOWING is not supported for column type "
                f"{order_types[0].value}",
                position_of(spec),
            )
    return Frame(mode, start, end)


def _constant_offset(node: exp.Expr | None, name: str) -> int:
    if node is None:
        return 1
    value, sign = node, 1
    if isinstance(value, exp.Neg):
        value, sign = value.this, -1
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        return sign * int(value.this)
    raise UnsupportedFeature(f"the offset of {name} must be an integer constant", position_of(node))


def _is_constant(node: exp.Expr) -> bool:
    value = node.this if isinstance(node, exp.Neg) else node
    return isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()


# What `_Planner.functions` returns per call: each function with its
# arguments still to be numbered (WindowExpr.args is filled in from them).
Planned = list[tuple[WindowExpr, list[Typed]]]
# How a call's value is read from its functions' columns: ("plain", None),
# ("avg", None), or plan_extra_aggregate's kind and result type (or separator).
Kind = tuple[str, ScalarType | str | None]


class _Planner:
    """Collects the scalars the Window operators read and their functions."""

    def __init__(self, rel: RelationExpr, binder: ScalarBinder) -> None:
        self.rel = rel
        self.binder = binder
        self.scalars: list[ScalarExpr] = []
        self.base = rel.desc.arity

    def column(self, expr: ScalarExpr) -> int:
        if isinstance(expr, Column) and expr.index < self.base:
            return expr.index
        if expr not in self.scalars:
            self.scalars.append(expr)
        return self.base + self.scalars.index(expr)

    def bind(self, node: exp.Expr) -> Typed:
        self.check_not_nested(node)
        return self.binder.bind(node)

    @staticmethod
    def check_not_nested(node: exp.Expr) -> None:
        nested = windows_in(node)
        if nested:
            raise WindowingError("window function calls cannot be nested", position_of(nested[0]))

    def functions(self, window: exp.Window) -> tuple[Planned, Kind]:
        """The WindowExprs of one call (two for avg) with their arguments, and its kind."""
        call = window.this
        if isinstance(call, exp.IgnoreNulls | exp.RespectNulls):
            raise UnsupportedFeature("IGNORE/RESPECT NULLS is not supported", position_of(call))
        if isinstance(call, exp.Filter) or window.args.get("filter") is not None:
            raise UnsupportedFeature(
                "FILTER is not supported for window functions", position_of(window)
            )
        name = call.sql_name().lower() if isinstance(call, exp.Func) else str(call)
        if isinstance(call, exp.Anonymous):
            name = call.name.lower()
        if type(call) in _RANKING:
            if list(call.iter_expressions()):
                raise self.binder.no_function(
                    call, name, [self.bind(a) for a in call.iter_expressions()]
                )
            return [(WindowExpr(_RANKING[type(call)]), [])], ("plain", None)
        if isinstance(call, exp.Lag | exp.Lead):
            return self._lag_lead(call, name), ("plain", None)
        if type(call) in _VALUE:
            return [(WindowExpr(_VALUE[type(call)]), [finalize(self.bind(call.this))])], (
                "plain",
                None,
            )
        if isinstance(call, exp.NthValue):
            value = finalize(self.bind(call.this))
            n_node = call.args.get("offset")
            if n_node is None or not _is_constant(n_node):
                raise UnsupportedFeature(
                    "the second argument of nth_value must be an integer constant",
                    position_of(n_node) or position_of(call),
                )
            n = _constant_offset(n_node, name)
            if n <= 0:
                raise NthValueError(
                    "argument of nth_value must be greater than zero", position_of(n_node)
                )
            return [(WindowExpr(WindowFunc.NTH_VALUE, offset=n), [value])], ("plain", None)
        if isinstance(call, EXTRA_AGGREGATES):
            return self._extra_aggregate(self._in_frame_order(call, window), window, name)
        if isinstance(call, exp.Avg) or type(call) in _AGGREGATES:
            arg = call.this
            if isinstance(arg, exp.Distinct):
                raise UnsupportedFeature(
                    "DISTINCT is not implemented for window functions", position_of(call)
                )
            if arg is None or call.expressions:
                args = [self.bind(a) for a in [arg, *call.expressions] if a is not None]
                raise self.binder.no_function(call, name, args)
            if isinstance(call, exp.Count) and isinstance(arg, exp.Star):
                true = ColumnType(S.BOOLEAN, False)
                return [(WindowExpr(WindowFunc.COUNT), [Typed(Literal(True, true), true)])], (
                    "plain",
                    None,
                )
            value = self.bind(arg)
            if isinstance(call, exp.Sum | exp.Avg) and value.scalar is S.INTERVAL:
                if value.unknown:
                    value = self.binder.resolve_unknown(value, S.INTERVAL, arg)
                planned: Planned = []
                kind, _, result = plan_interval_sum(
                    call, value, self._adder(planned, call), None, False
                )
                return planned, (kind, result)
            value = check_aggregate_argument(name, value, arg)
            if isinstance(call, exp.Avg):
                return [
                    (WindowExpr(WindowFunc.SUM), [value]),
                    (WindowExpr(WindowFunc.COUNT), [value]),
                ], ("avg", None)
            return [(WindowExpr(_AGGREGATES[type(call)]), [value])], ("plain", None)
        raise UnsupportedFeature(
            f"window function {name} is not supported", position_of(call) or position_of(window)
        )

    def _lag_lead(self, call: exp.Lag | exp.Lead, name: str) -> Planned:
        """lag/lead(value [, offset [, default]]): a constant offset is
        folded into the function (a negative one swaps lag and lead); any
        other offset is an integer column read per row."""
        value = finalize(self.bind(call.this))
        func = WindowFunc.LAG if isinstance(call, exp.Lag) else WindowFunc.LEAD
        offset_node = call.args.get("offset")
        args = [value]
        offset: int | None
        if offset_node is None or _is_constant(offset_node):
            offset = _constant_offset(offset_node, name)
            if offset < 0:
                func = WindowFunc.LEAD if func is WindowFunc.LAG else WindowFunc.LAG
                offset = -offset
        else:
            by = self.bind(offset_node)
            if by.unknown:  # NULL or a quoted integer: PostgreSQL reads it as an integer
                by = Typed(Cast(by.expr, S.BIGINT), ColumnType(S.BIGINT, True))
            by = finalize(by)
            if not is_integer(by.scalar):
                raise self.binder.no_function(call, name, [value, by])
            args.append(Typed(Cast(by.expr, S.BIGINT), ColumnType(S.BIGINT, by.type.nullable)))
            offset = None
        default_node = call.args.get("default")
        if default_node is not None:
            nodes: list[exp.Expr | None] = [call.this, default_node]
            unified, _ = self.binder.unify([value, self.bind(default_node)], nodes, name)
            args = [unified[0], *args[1:], unified[1]]
        return [(WindowExpr(func, offset=offset), args)]

    @staticmethod
    def _in_frame_order(call: exp.Expr, window: exp.Window) -> exp.Expr:
        """array_agg / string_agg without an ORDER BY of their own collect
        their frame's rows in the window's ORDER BY order, as in PostgreSQL:
        the call with that ORDER BY (string_agg orders by its value only)."""
        order = window.args.get("order")
        if (
            not isinstance(call, exp.ArrayAgg | exp.GroupConcat)
            or order is None
            or isinstance(call.this, exp.Order)
        ):
            return call
        call = call.copy()
        keys = [key.copy() for key in order.expressions]
        if isinstance(call, exp.GroupConcat) and (len(keys) != 1 or keys[0].this != call.this):
            raise UnsupportedFeature(
                "string_agg over a window ordered by anything but the aggregated value is "
                "not supported",
                position_of(order) or position_of(window),
            )
        call.set("this", exp.Order(this=call.this, expressions=keys))
        return call

    def _extra_aggregate(
        self, call: exp.Expr, window: exp.Window, name: str
    ) -> tuple[Planned, Kind]:
        """bool_and/bool_or, string_agg, array_agg, jsonb_agg, stddev,
        variance, ... as GROUP BY plans them (sql/aggregates.py), each of
        their aggregates a window function over the frame."""
        self.check_not_nested(call)
        planned: Planned = []
        if isinstance(call, JsonbAgg | JsonbObjectAgg) and window.args.get("order") is not None:
            raise UnsupportedFeature(
                f"{name} over an ordered window is not supported", position_of(window)
            )
        kind, _, result = plan_extra_aggregate(call, self.binder, self._adder(planned, call), None)
        return planned, (kind, result)

    def _adder(self, planned: Planned, call: exp.Expr) -> Callable[[AggregateExpr], int]:
        """The `index` sql/aggregates.py plans an aggregate's parts with:
        each part a window function over the frame, added to `planned`."""

        def add(aggregate: AggregateExpr) -> int:
            if aggregate.distinct:
                raise UnsupportedFeature(
                    "DISTINCT is not implemented for window functions", position_of(call)
                )
            func = WindowFunc(aggregate.func.value)
            # array_agg's record is built from its fields' columns (WindowExpr.aggregate)
            fields = (
                aggregate.expr.fields if isinstance(aggregate.expr, Record) else (aggregate.expr,)
            )
            values = [Typed(f, f.typ(self.rel.desc.types)) for f in fields]
            window = WindowExpr(
                func,
                separator=aggregate.separator,
                descending=aggregate.descending,
                order=aggregate.order,
            )
            planned.append((window, values))
            return len(planned) - 1

        return add


def plan_windows(
    rel: RelationExpr, binder: ScalarBinder, nodes: list[exp.Expr]
) -> tuple[RelationExpr, ScalarBinder]:
    """The window calls in `nodes` (select items, ORDER BY) planned over
    `rel`; the binder to bind those nodes with afterwards."""
    calls = [w for node in nodes for w in windows_in(node)]
    if not calls:
        return rel, binder
    planner = _Planner(rel, binder)
    clause = binder.clause
    binder.clause = "window functions"
    # (partition columns, order keys) -> [(call id, functions, kind, arg types)]
    specs: dict[tuple, list[tuple[int, list[WindowExpr], Kind, list]]] = {}
    # A call written again (in ORDER BY, DISTINCT ON) is the same column, as
    # in PostgreSQL: `row_number() OVER ()` twice numbers the rows once.
    first_call: dict[exp.Window, int] = {}
    repeats: dict[int, int] = {}
    try:
        for window in calls:
            if window in first_call:
                repeats[id(window)] = first_call[window]
                continue
            first_call[window] = id(window)
            if window.args.get("alias") is not None:
                raise UnsupportedFeature("named windows are not supported", position_of(window))
            partition = tuple(
                planner.column(planner.bind(p).expr) for p in window.args.get("partition_by") or []
            )
            order = window.args.get("order")
            keys = []
            key_types = []
            for ordered in order.expressions if order is not None else []:
                desc, nulls_last = _order_direction(ordered)
                key = finalize(planner.bind(ordered.this))
                keys.append(OrderKey(planner.column(key.expr), desc, nulls_last))
                key_types.append(key.scalar)
            frame = _frame(window, keys, key_types)
            funcs, kind = planner.functions(window)
            planned = [
                dataclasses.replace(
                    f,
                    args=tuple(planner.column(a.expr) for a in args),
                    frame=frame if f.func in FRAMED else DEFAULT_FRAME,
                )
                for f, args in funcs
            ]
            types = [a.type for _, args in funcs for a in args]
            entry = (id(window), planned, kind, types)
            specs.setdefault((partition, tuple(keys)), []).append(entry)
    finally:
        binder.clause = clause
    out = _with_scalars(rel, planner.scalars)
    values: dict[int, Typed] = {}
    for (partition, keys), entries in specs.items():
        functions: list[WindowExpr] = []
        where: list[tuple[int, Kind, list[int], list]] = []
        for call_id, planned, kind, types in entries:
            start = out.desc.arity + len(functions)
            functions += planned
            where.append((call_id, kind, list(range(start, start + len(planned))), types))
        out = interval_keys.ordered(
            Window(out, partition, keys, tuple(functions), tuple(f.func.value for f in functions))
        )
        for call_id, kind, columns, types in where:
            values[call_id] = _value(out, kind, columns, types)
    for call_id, first in repeats.items():
        values[call_id] = values[first]
    return out, WindowBinder(binder, out.desc.types, values)


def _with_scalars(rel: RelationExpr, scalars: list[ScalarExpr]) -> RelationExpr:
    """`rel` with `scalars` appended right after its columns, where the
    planner numbered them: the columns that lowering their subqueries adds
    are projected away again."""
    if not scalars:
        return rel
    arity = rel.desc.arity
    lowered, scalars = lower_subqueries(rel, scalars)
    out: RelationExpr = Map(lowered, tuple(scalars))
    width = lowered.desc.arity
    if width == arity:
        return out
    return Project(out, tuple(range(arity)) + tuple(range(width, width + len(scalars))))


def _value(rel: RelationExpr, kind: Kind, columns: list[int], arg_types: list) -> Typed:
    types = rel.desc.types
    if kind[0] == "plain":
        return Typed(Column(columns[0]), types[columns[0]])
    if kind[0] != "avg":  # an aggregate of sql/aggregates.py
        expr = extra_result(kind[0], tuple(columns), types, kind[1])
        return Typed(expr, expr.typ(types))
    total, count = Column(columns[0]), Column(columns[1])
    result = avg_result_type(arg_types[0].scalar_type)
    numerator: ScalarExpr = total
    if types[columns[0]].scalar_type is not result:
        numerator = Cast(total, result)
    expr = If(
        CallBinary(BinaryFunc.EQ, count, Literal(0, ColumnType(S.BIGINT, False))),
        null_of(result),
        CallBinary(BinaryFunc.DIV, numerator, Cast(count, result)),
    )
    return Typed(expr, expr.typ(types))
