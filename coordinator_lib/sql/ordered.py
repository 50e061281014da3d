"""Window functions in a SELECT list or ORDER BY, planned as Window
operators (expr/relation.py) over the query's rows after WHERE, GROUP BY and
HAVING, as PostgreSQL evaluates them.

    SELECT k, v, rank() OVER (PARTITION BY k ORDER BY v) FROM t

becomes `Window partition=[#0] order=[#1] [rank()]` over t, and the select
list reads the new column. The arguments, PARTITION BY and ORDER BY
expressions are computed by one Map below the Window operators (one per
distinct OVER clause, stacked); avg is sum / count, as for GROUP BY.
Only the default frame (RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
is planned.
"""

from __future__ import annotations

from sqlglot import exp

from coordinator_lib.expr.relation import (
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
    ScalarExpr,
)
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.errors import SqlError, UnsupportedFeature
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


def _check_frame(window: exp.Window) -> None:
    spec = window.args.get("spec")
    if spec is None:
        return
    default = (
        str(spec.args.get("kind") or "").upper() == "RANGE"
        and str(spec.args.get("start") or "").upper() == "UNBOUNDED"
        and str(spec.args.get("start_side") or "").upper() == "PRECEDING"
        and str(spec.args.get("end") or "").upper() == "CURRENT ROW"
        and not spec.args.get("exclude")
    )
    if not default:
        raise UnsupportedFeature(
            "window frames other than the default (RANGE BETWEEN UNBOUNDED PRECEDING "
            "AND CURRENT ROW) are not supported",
            position_of(spec) or position_of(window),
        )


def _constant_offset(node: exp.Expr | None, name: str) -> int:
    if node is None:
        return 1
    value, sign = node, 1
    if isinstance(value, exp.Neg):
        value, sign = value.this, -1
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        return sign * int(value.this)
    raise UnsupportedFeature(f"the offset of {name} must be an integer constant", position_of(node))


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
        nested = windows_in(node)
        if nested:
            raise WindowingError("window function calls cannot be nested", position_of(nested[0]))
        return self.binder.bind(node)

    def functions(self, window: exp.Window) -> tuple[list[tuple[WindowFunc, list, int]], str]:
        """[(func, [Typed args], offset)] for one call (two for avg), and its kind."""
        call = window.this
        if isinstance(call, exp.IgnoreNulls | exp.RespectNulls):
            raise UnsupportedFeature("IGNORE/RESPECT NULLS is not supported", position_of(call))
        if isinstance(call, exp.Filter) or window.args.get("filter") is not None:
            raise UnsupportedFeature(
                "FILTER is not supported for window functions", position_of(window)
            )
        name = call.sql_name().lower() if isinstance(call, exp.Func) else str(call)
        if type(call) in _RANKING:
            if list(call.iter_expressions()):
                raise self.binder.no_function(
                    call, name, [self.bind(a) for a in call.iter_expressions()]
                )
            return [(_RANKING[type(call)], [], 1)], "plain"
        if isinstance(call, exp.Lag | exp.Lead):
            value = finalize(self.bind(call.this))
            offset = _constant_offset(call.args.get("offset"), name)
            func = WindowFunc.LAG if isinstance(call, exp.Lag) else WindowFunc.LEAD
            if offset < 0:
                func = WindowFunc.LEAD if func is WindowFunc.LAG else WindowFunc.LAG
                offset = -offset
            default_node = call.args.get("default")
            args = [value]
            if default_node is not None:
                nodes: list[exp.Expr | None] = [call.this, default_node]
                args, _ = self.binder.unify([value, self.bind(default_node)], nodes, name)
            return [(func, args, offset)], "plain"
        if type(call) in _VALUE:
            return [(_VALUE[type(call)], [finalize(self.bind(call.this))], 1)], "plain"
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
                return [(WindowFunc.COUNT, [Typed(Literal(True, true), true)], 1)], "plain"
            value = check_aggregate_argument(name, self.bind(arg), arg)
            if isinstance(call, exp.Avg):
                return [(WindowFunc.SUM, [value], 1), (WindowFunc.COUNT, [value], 1)], "avg"
            return [(_AGGREGATES[type(call)], [value], 1)], "plain"
        raise UnsupportedFeature(
            f"window function {name} is not supported", position_of(call) or position_of(window)
        )


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
    # (partition columns, order keys) -> [(call id, funcs, kind, arg types)]
    specs: dict[tuple, list[tuple[int, list[tuple[WindowFunc, list[int], int]], str, list]]] = {}
    try:
        for window in calls:
            if window.args.get("alias") is not None:
                raise UnsupportedFeature("named windows are not supported", position_of(window))
            _check_frame(window)
            partition = tuple(
                planner.column(planner.bind(p).expr) for p in window.args.get("partition_by") or []
            )
            order = window.args.get("order")
            keys = []
            for ordered in order.expressions if order is not None else []:
                desc, nulls_last = _order_direction(ordered)
                keys.append(
                    OrderKey(
                        planner.column(finalize(planner.bind(ordered.this)).expr), desc, nulls_last
                    )
                )
            funcs, kind = planner.functions(window)
            planned = [(f, [planner.column(a.expr) for a in args], off) for f, args, off in funcs]
            types = [a.type for _, args, _ in funcs for a in args]
            entry = (id(window), planned, kind, types)
            specs.setdefault((partition, tuple(keys)), []).append(entry)
    finally:
        binder.clause = clause
    out = _with_scalars(rel, planner.scalars)
    values: dict[int, Typed] = {}
    for (partition, keys), entries in specs.items():
        functions: list[WindowExpr] = []
        where: list[tuple[int, str, list[int], list]] = []
        for call_id, planned, kind, types in entries:
            start = out.desc.arity + len(functions)
            functions += [WindowExpr(f, tuple(args), off) for f, args, off in planned]
            where.append((call_id, kind, list(range(start, start + len(planned))), types))
        out = Window(out, partition, keys, tuple(functions), tuple(f.func.value for f in functions))
        for call_id, kind, columns, types in where:
            values[call_id] = _value(out, kind, columns, types)
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


def _value(rel: RelationExpr, kind: str, columns: list[int], arg_types: list) -> Typed:
    types = rel.desc.types
    if kind == "plain":
        return Typed(Column(columns[0]), types[columns[0]])
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
