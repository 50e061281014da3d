"""Table functions in FROM: `generate_series(start, stop [, step])` of
integers, `unnest(array)`, `jsonb_array_elements[_text](jsonb)`,
`jsonb_object_keys(jsonb)` and `jsonb_each[_text](jsonb)` (columns key,
value), `[WITH ORDINALITY] [AS a (x [, n])]`, as the first FROM item,
after a comma or JOIN (where, as in PostgreSQL, the arguments may read
the items to their left: it is planned as a LATERAL subquery,
sql/lateral.py), or after LATERAL.

A call is a FlatMap (expr/relation.py) over one row holding its arguments
(a Map), so a view maintains it as it maintains a Map: linear, row by row.
generate_series's step 0 is a RaiseError in that Map (22023, as PostgreSQL),
so it fails on the rows it fails on, as every scalar error does.

`ROWS FROM (f(...), g(...), ...)` and `unnest(a, b, ...)` of several arrays
zip the calls (PostgreSQL's rule): one FlatMap with `zipped` calls over one
Map of all their arguments, row i holding the i-th value of each and NULL
where a call gave fewer (expr/table_functions.rows_from).

The column is named after the first alias column (`AS g (x)`), else
after the function's named OUT parameter (`value` for
jsonb_array_elements[_text]), else the alias (`AS g`), else the function,
as PostgreSQL names it; the ordinality column is `ordinality`. Without
ordinality the alias also names the one column when no column has its
name (PostgreSQL's whole-row reference of a scalar function: `SELECT e
FROM jsonb_array_elements(...) AS e`).
Other table functions are 0A000; a wrong argument type is 42883.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlglot import exp

from coordinator_lib.expr.relation import (
    Constant,
    FlatMap,
    Map,
    Project,
    RelationExpr,
    TableCall,
)
from coordinator_lib.expr.scalar import (
    BinaryFunc,
    CallBinary,
    Column,
    If,
    Literal,
    RaiseError,
    ScalarExpr,
)
from coordinator_lib.expr.table_functions import JSONB_FUNCTIONS, TableFunc
from coordinator_lib.repr.relation import ColumnType, RelationDesc, ScalarType
from coordinator_lib.sql.errors import (
    InvalidColumnReference,
    InvalidParameter,
    UndefinedFunction,
    UnsupportedFeature,
)
from coordinator_lib.sql.function_calls import interval_constant
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.typed import Typed

if TYPE_CHECKING:
    from coordinator_lib.sql.scalar import ScalarBinder

S = ScalarType
_ONE_ROW = Constant((((), 1),), RelationDesc((), ()))
_INTEGERS = (S.SMALLINT, S.INTEGER, S.BIGINT)
_JSONB = {f.value: f for f in JSONB_FUNCTIONS}
_TWO_COLUMNS = (TableFunc.JSONB_EACH, TableFunc.JSONB_EACH_TEXT)


def is_table_function(node: exp.Expr) -> bool:
    """Whether the FROM item `node` calls a function (`unnest(...)`, `f(...)`,
    `ROWS FROM (f(...), ...)`)."""
    return isinstance(node, exp.Unnest) or (
        isinstance(node, exp.Table)
        and (isinstance(node.this, exp.Func) or bool(node.args.get("rows_from")))
    )


def as_lateral_subquery(node: exp.Expr, alias: exp.Expr | None) -> exp.Subquery:
    """`f(...) AS alias` (or the function of `LATERAL f(...) AS alias`) as
    `(SELECT * FROM f(...) AS alias) AS alias`, to plan as a LATERAL subquery;
    without an alias the subquery is named after the function, as the call
    is (`t, generate_series(...)` reads `generate_series.generate_series`).
    Its meta `scalar_function` says the alias as a column means the one
    column (`is_scalar_call`)."""
    item = node.copy()
    if isinstance(item, exp.Func) and not isinstance(item, exp.Unnest):
        ordinality = node.parent.args.get("ordinality") if node.parent else None
        item = exp.Table(this=item, ordinality=ordinality)
    if alias is not None:
        item.set("alias", alias.copy())
    else:
        alias = exp.TableAlias(this=exp.to_identifier(reference_name(item), quoted=True))
    select = exp.Select(expressions=[exp.Star()]).from_(item, copy=False)
    subquery = exp.Subquery(this=select, alias=alias.copy())
    subquery.meta["scalar_function"] = is_scalar_call(item)
    return subquery


def reference_name(node: exp.Expr) -> str:
    """The name an unaliased table function FROM item is qualified by: its
    (first) function's, as PostgreSQL names it."""
    if isinstance(node, exp.Unnest):
        return TableFunc.UNNEST.value
    call = node.args["rows_from"][0] if node.args.get("rows_from") else node
    call = call if isinstance(call, exp.Unnest) else call.this
    if isinstance(call, exp.Unnest):
        return TableFunc.UNNEST.value
    if isinstance(call, exp.ExplodingGenerateSeries):
        return TableFunc.GENERATE_SERIES.value
    return call.name.lower() if isinstance(call, exp.Anonymous) else call.sql_name().lower()


def is_scalar_call(node: exp.Expr) -> bool:
    """Whether the FROM item `node` gives one column (one call of a function
    returning a scalar, without ordinality): PostgreSQL then reads its alias
    as a column reference as that column (`FROM jsonb_array_elements(j) AS
    e` has a column `value`; `SELECT e` is it)."""
    if isinstance(node, exp.Unnest):
        return len(node.expressions) == 1 and not node.args.get("offset")
    if node.args.get("ordinality"):
        return False
    calls = node.args.get("rows_from")
    if calls:  # ROWS FROM (f(...)) of one call is that call
        if len(calls) > 1:
            return False
        node = calls[0]
        if isinstance(node, exp.Unnest):
            return len(node.expressions) == 1
    call = node.this
    return not (isinstance(call, exp.Anonymous) and _JSONB.get(call.name.lower()) in _TWO_COLUMNS)


def plan_table_function(node: exp.Expr, binder: ScalarBinder) -> tuple[RelationExpr, list[str]]:
    """The rows of the table function FROM item `node` and its column names."""
    call = node if isinstance(node, exp.Unnest) else node.this
    alias = node.args.get("alias")
    names = [a.name for a in alias.columns] if alias is not None else []
    if isinstance(node, exp.Table) and node.args.get("rows_from"):
        return _rows_from(node, list(node.args["rows_from"]), binder)
    if isinstance(node, exp.Unnest) and len(node.expressions) > 1:
        # unnest(a, b, ...) in FROM is ROWS FROM (unnest(a), unnest(b), ...)
        calls = [exp.Unnest(expressions=[e]).update_positions(node) for e in node.expressions]
        return _rows_from(node, calls, binder)
    if isinstance(node, exp.Unnest):
        offset = node.args.get("offset")
        ordinality = bool(offset)
        if isinstance(offset, exp.Identifier):  # `AS u (x, n)`: sqlglot keeps n here
            names.append(offset.name)
        flat = _unnest(node, binder, ordinality)
    elif isinstance(call, exp.ExplodingGenerateSeries):
        ordinality = bool(node.args.get("ordinality"))
        flat = _generate_series(call, binder, ordinality)
    elif isinstance(call, exp.Anonymous) and call.name.lower() in _JSONB:
        ordinality = bool(node.args.get("ordinality"))
        flat = _jsonb(call, _JSONB[call.name.lower()], binder, ordinality)
    else:
        written = call.name if isinstance(call, exp.Anonymous) else call.sql_name().lower()
        raise UnsupportedFeature(f"table function {written} is not supported", position_of(node))
    if flat.func in _TWO_COLUMNS:  # jsonb_each: (key, value)
        columns = ["key", "value"]
    else:
        # PostgreSQL's chooseScalarFunctionAlias: a named OUT parameter
        # (jsonb_array_elements' `value`), else the alias, else the function
        name = _name_of(flat.func)
        if name == flat.func.value and alias is not None and alias.name and not names:
            name = alias.name
        columns = [name]
    columns += ["ordinality"] if ordinality else []
    if len(names) > len(columns):
        raise InvalidColumnReference(
            f"too many column aliases specified for function {flat.func.value}",
            position_of(alias),
        )
    columns[: len(names)] = names
    arity = flat.input.desc.arity
    return Project(flat, tuple(range(arity, flat.desc.arity)), tuple(columns)), columns


def _rows_from(
    node: exp.Expr, calls: Sequence[exp.Expr], binder: ScalarBinder
) -> tuple[RelationExpr, list[str]]:
    """`ROWS FROM (f(...), g(...), ...) [WITH ORDINALITY] [AS a (x, ...)]`:
    the calls zipped side by side in one FlatMap (row i holds the i-th value
    of each, NULL where a call gave fewer). Its columns: each call's (named
    as `_name_of` says; key and value for jsonb_each; the alias for a lone
    call named after its function, as PostgreSQL), then the ordinality."""
    alias = node.args.get("alias")
    names = [a.name for a in alias.columns] if alias is not None else []
    if isinstance(node, exp.Unnest):
        ordinality = bool(node.args.get("offset"))
        if isinstance(node.args.get("offset"), exp.Identifier):  # `AS u (x, y, n)`
            names.append(node.args["offset"].name)
    else:
        ordinality = bool(node.args.get("ordinality"))
    flats = [_call(item, binder) for item in calls]
    scalars: list[ScalarExpr] = []
    zipped: list[TableCall] = []
    columns: list[str] = []
    for flat in flats:
        assert isinstance(flat.input, Map) and flat.input.input is _ONE_ROW
        offset = len(scalars)
        scalars += flat.input.scalars
        exprs = tuple(_shifted(e, offset) for e in flat.exprs)
        zipped.append(TableCall(flat.func, exprs))
        columns += ["key", "value"] if flat.func in _TWO_COLUMNS else [_name_of(flat.func)]
    if len(flats) == 1 and columns == [flat.func.value] and alias is not None and alias.name:
        columns = [alias.name]
    first, rest = zipped[0], tuple(zipped[1:])
    flat = FlatMap(
        Map(_ONE_ROW, tuple(scalars)), first.func, first.exprs, ordinality=ordinality, zipped=rest
    )
    columns += ["ordinality"] if ordinality else []
    if len(names) > len(columns):
        raise InvalidColumnReference(
            "too many column aliases specified for function", position_of(alias)
        )
    columns[: len(names)] = names
    arity = flat.input.desc.arity
    return Project(flat, tuple(range(arity, flat.desc.arity)), tuple(columns)), columns


def _name_of(func: TableFunc) -> str:
    """A one-column call's column in ROWS FROM: its named OUT parameter
    (jsonb_array_elements' `value`), else the function's name (PostgreSQL's
    chooseScalarFunctionAlias)."""
    if func in (TableFunc.JSONB_ARRAY_ELEMENTS, TableFunc.JSONB_ARRAY_ELEMENTS_TEXT):
        return "value"
    return func.value


def _call(item: exp.Expr, binder: ScalarBinder) -> FlatMap:
    """One call of ROWS FROM (no alias or ordinality of its own), as a FlatMap
    over a Map of its arguments on one row."""
    call = item if isinstance(item, exp.Unnest) else item.this
    if isinstance(item, exp.Unnest) and len(item.expressions) == 1:
        return _unnest(item, binder, False)
    if isinstance(call, exp.ExplodingGenerateSeries):
        return _generate_series(call, binder, False)
    if isinstance(call, exp.Anonymous) and call.name.lower() in _JSONB:
        return _jsonb(call, _JSONB[call.name.lower()], binder, False)
    written = call.sql_name().lower() if not isinstance(call, exp.Anonymous) else call.name
    raise UnsupportedFeature(
        f"table function {written} in ROWS FROM is not supported", position_of(item)
    )


def _shifted(expr: ScalarExpr, offset: int) -> ScalarExpr:
    """A call's argument `Column(i)` of its own Map as column `offset + i` of
    the Map holding every call's arguments."""
    assert isinstance(expr, Column), expr
    return Column(expr.index + offset)


def _generate_series(
    call: exp.ExplodingGenerateSeries, binder: ScalarBinder, ordinality: bool
) -> FlatMap:
    nodes = [call.args[k] for k in ("start", "end", "step") if call.args.get(k) is not None]
    if len(nodes) == 3:
        step = nodes[2]
        if isinstance(step, exp.Cast) and step.to.is_type(exp.DType.INTERVAL):
            step = exp.Interval(this=step.this)  # '90 minutes'::interval
        if isinstance(step, exp.Interval):
            return _timestamp_series(call, [*nodes[:2], step], binder, ordinality)
    values = [binder.bind(n) for n in nodes]
    known = [v.scalar for v in values if not v.unknown]
    if any(t not in _INTEGERS for t in known):
        shown = ", ".join("unknown" if v.unknown else v.scalar.value for v in values)
        raise UndefinedFunction(
            f"function generate_series({shown}) does not exist", position_of(call)
        )
    target = S.BIGINT if S.BIGINT in known else S.INTEGER
    args = [binder.cast_to(v, target, n) for v, n in zip(values, nodes, strict=True)]
    if len(args) == 2:
        args.append(Typed(Literal(1, ColumnType(target, False)), ColumnType(target, False)))
    start, stop, step = (a.expr for a in args)
    zero = Literal(0, ColumnType(target, False))
    error = RaiseError("22023", "step size cannot equal zero", ColumnType(target, True))
    checked = If(CallBinary(BinaryFunc.EQ, step, zero), error, step)
    inputs = Map(_ONE_ROW, (start, stop, checked))
    columns = (Column(0), Column(1), Column(2))
    return FlatMap(inputs, TableFunc.GENERATE_SERIES, columns, ordinality=ordinality)


def _timestamp_series(
    call: exp.Expr, nodes: list[exp.Expr], binder: ScalarBinder, ordinality: bool
) -> FlatMap:
    """generate_series(timestamp[tz], timestamp[tz], INTERVAL '...'): the step
    a constant interval (Tidemark has no interval column type)."""
    step_node = nodes[2]
    assert isinstance(step_node, exp.Interval)
    months, days, micros = interval_constant(step_node)
    if months == days == micros == 0:
        raise InvalidParameter("step size cannot equal zero", position_of(nodes[2]))
    values = [binder.bind(n) for n in nodes[:2]]
    known = [v.scalar for v in values if not v.unknown]
    if any(t not in (S.DATE, S.TIMESTAMP, S.TIMESTAMPTZ) for t in known):
        shown = ", ".join("unknown" if v.unknown else v.scalar.value for v in values)
        raise UndefinedFunction(
            f"function generate_series({shown}, interval) does not exist", position_of(call)
        )
    target = S.TIMESTAMP if known and all(t is S.TIMESTAMP for t in known) else S.TIMESTAMPTZ
    start, stop = (binder.cast_to(v, target, n) for v, n in zip(values, nodes, strict=False))
    step = (
        Literal(months, ColumnType(S.INTEGER, False)),
        Literal(days, ColumnType(S.INTEGER, False)),
        Literal(micros, ColumnType(S.BIGINT, False)),
    )
    inputs = Map(_ONE_ROW, (start.expr, stop.expr, *step))
    columns = tuple(Column(i) for i in range(5))
    return FlatMap(inputs, TableFunc.GENERATE_SERIES, columns, ordinality=ordinality)


def _jsonb(call: exp.Anonymous, func: TableFunc, binder: ScalarBinder, ordinality: bool) -> FlatMap:
    nodes = list(call.expressions)
    values = [binder.bind(n) for n in nodes]
    if len(values) == 1 and values[0].unknown:
        values = [binder.resolve_unknown(values[0], S.JSONB, nodes[0])]
    if len(values) != 1 or values[0].scalar is not S.JSONB:
        shown = ", ".join("unknown" if v.unknown else v.scalar.value for v in values)
        raise UndefinedFunction(f"function {func.value}({shown}) does not exist", position_of(call))
    return FlatMap(Map(_ONE_ROW, (values[0].expr,)), func, (Column(0),), ordinality=ordinality)


def _unnest(node: exp.Unnest, binder: ScalarBinder, ordinality: bool) -> FlatMap:
    nodes = list(node.expressions)
    if len(nodes) != 1:
        raise UnsupportedFeature("unnest of several arrays is not supported", position_of(node))
    value = binder.bind(nodes[0])
    if value.unknown or value.scalar.element is None:  # an array or a list
        shown = "unknown" if value.unknown else value.scalar.value
        raise UndefinedFunction(f"function unnest({shown}) does not exist", position_of(node))
    return FlatMap(
        Map(_ONE_ROW, (value.expr,)), TableFunc.UNNEST, (Column(0),), ordinality=ordinality
    )


__all__ = [
    "as_lateral_subquery",
    "is_scalar_call",
    "is_table_function",
    "plan_table_function",
    "reference_name",
]
