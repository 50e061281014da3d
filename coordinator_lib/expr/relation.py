"""Relation expressions: the operators every view is lowered to.

Each node's `desc` is its output RelationDesc. Column names in descs are for
EXPLAIN and for the final output; operators refer to columns by index. The
compute layer renders each operator with a delta rule where it has one (see
docs/architecture.md, "How SQL becomes a plan") and otherwise by recompute-and-diff.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from functools import cached_property

from coordinator_lib.expr.scalar import Column, Record, ScalarExpr, is_integer
from coordinator_lib.expr.table_functions import TableFunc, output_types
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import ColumnType, RelationDesc, ScalarType, common_column_type
from coordinator_lib.repr.update import Row


class RelationExpr:
    """Base of relation expression nodes."""

    @property
    def desc(self) -> RelationDesc:
        raise TypeError(f"{type(self).__name__} has no desc")  # every node overrides

    @property
    def types(self) -> tuple[ColumnType, ...]:
        return self.desc.types

    def inputs(self) -> tuple[RelationExpr, ...]:
        return ()

    def depends_on(self) -> set[GlobalId]:
        """The collections this expression reads. Each shared subplan is
        visited once: plans of nested subqueries reuse a subplan on several
        branches, and walking them as a tree was exponential in the depth."""
        out: set[GlobalId] = set()
        seen: set[int] = set()
        pending: list[RelationExpr] = [self]
        while pending:
            node = pending.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if type(node).depends_on is not RelationExpr.depends_on:
                out |= node.depends_on()  # a leaf that reads a collection (Get)
            pending.extend(node.inputs())
        return out


def _unique_names(names: list[str]) -> tuple[str, ...]:
    """Descs need unique names; joins can repeat them (`id`, `id`)."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        if name in seen:
            seen[name] += 1
            candidate = f"{name}_{seen[name]}"
            while candidate in seen:
                seen[name] += 1
                candidate = f"{name}_{seen[name]}"
            seen[candidate] = 0
            out.append(candidate)
        else:
            seen[name] = 0
            out.append(name)
    return tuple(out)


@dataclass(frozen=True)
class Get(RelationExpr):
    """Read a collection (table, source, view output, index)."""

    id: GlobalId
    collection_desc: RelationDesc

    @property
    def desc(self) -> RelationDesc:
        return self.collection_desc

    def depends_on(self) -> set[GlobalId]:
        return {self.id}


@dataclass(frozen=True)
class Constant(RelationExpr):
    """Fixed rows with multiplicities (each diff at the dataflow's as_of)."""

    rows: tuple[tuple[Row, int], ...]
    constant_desc: RelationDesc

    @property
    def desc(self) -> RelationDesc:
        return self.constant_desc


@dataclass(frozen=True)
class Project(RelationExpr):
    """Keep (and reorder, or repeat) the columns `outputs`."""

    input: RelationExpr
    outputs: tuple[int, ...]
    names: tuple[str, ...] | None = None

    @cached_property
    def desc(self) -> RelationDesc:
        d = self.input.desc
        names = list(self.names) if self.names else [d.names[i] for i in self.outputs]
        return RelationDesc(_unique_names(names), tuple(d.types[i] for i in self.outputs))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Map(RelationExpr):
    """Append one column per scalar expression (each may use earlier ones)."""

    input: RelationExpr
    scalars: tuple[ScalarExpr, ...]
    names: tuple[str, ...] = ()

    @cached_property
    def desc(self) -> RelationDesc:
        d = self.input.desc
        types = list(d.types)
        for scalar in self.scalars:
            types.append(scalar.typ(tuple(types)))
        names = list(d.names) + [
            self.names[i] if i < len(self.names) else f"?column{i}?"
            for i in range(len(self.scalars))
        ]
        return RelationDesc(_unique_names(names), tuple(types))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@dataclass(frozen=True)
class TableCall:
    """One table function call of a FlatMap zipping several (ROWS FROM)."""

    func: TableFunc
    exprs: tuple[ScalarExpr, ...]


@dataclass(frozen=True)
class FlatMap(RelationExpr):
    """The input's columns, then for each row every value `func(*exprs)`
    gives (expr/table_functions.py; one column or several), each its own
    row, with `ordinality` its 1-based position after it; a row it gives no
    values for leaves.

    With `zipped` calls, PostgreSQL's ROWS FROM (func(...), g(...), ...):
    the calls run side by side, row i holding the i-th value of each (their
    columns in order) and NULL where a call gave fewer, as many rows as the
    longest gives (table_functions.rows_from)."""

    input: RelationExpr
    func: TableFunc
    exprs: tuple[ScalarExpr, ...]
    names: tuple[str, ...] = ()
    ordinality: bool = False
    zipped: tuple[TableCall, ...] = ()

    @property
    def calls(self) -> tuple[TableCall, ...]:
        """Every call, the first one (`func`, `exprs`) first."""
        return (TableCall(self.func, self.exprs), *self.zipped)

    def call_types(self) -> list[tuple[ColumnType, ...]]:
        """The columns each call gives (nullable where zipped: padding)."""
        d = self.input.desc
        out = [output_types(c.func, [e.typ(d.types) for e in c.exprs]) for c in self.calls]
        if self.zipped:
            out = [tuple(dataclasses.replace(t, nullable=True) for t in ts) for ts in out]
        return out

    @cached_property
    def desc(self) -> RelationDesc:
        d = self.input.desc
        types = [*d.types, *(t for ts in self.call_types() for t in ts)]
        if self.ordinality:
            types.append(ColumnType(ScalarType.BIGINT, False))
        added = len(types) - d.arity
        names = [self.names[i] if i < len(self.names) else self.func.value for i in range(added)]
        return RelationDesc(_unique_names([*d.names, *names]), tuple(types))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Filter(RelationExpr):
    """Keep rows where every predicate is true (NULL and false drop the row)."""

    input: RelationExpr
    predicates: tuple[ScalarExpr, ...]

    @property
    def desc(self) -> RelationDesc:
        return self.input.desc

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Join(RelationExpr):
    """Inner join of all inputs; output columns are the inputs' columns
    concatenated. Each equivalence class lists expressions (over the
    concatenated columns) that must all be equal (and not NULL)."""

    inputs_: tuple[RelationExpr, ...]
    equivalences: tuple[tuple[ScalarExpr, ...], ...]

    @cached_property
    def desc(self) -> RelationDesc:
        names: list[str] = []
        types: list[ColumnType] = []
        for child in self.inputs_:
            names += child.desc.names
            types += child.desc.types
        return RelationDesc(_unique_names(names), tuple(types))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return self.inputs_

    def input_offsets(self) -> list[int]:
        """The index of each input's first column in the output."""
        offsets, total = [], 0
        for child in self.inputs_:
            offsets.append(total)
            total += child.desc.arity
        return offsets


class AggregateFunc(StrEnum):
    COUNT = "count"  # count(expr): non-NULL values; count(*) is count of TRUE
    SUM = "sum"
    MIN = "min"
    MAX = "max"
    # string_agg(text, separator): the non-NULL values in ascending order (or
    # `descending`), each as often as its multiplicity, joined by `separator`.
    STRING_AGG = "string_agg"
    # array_agg(value [ORDER BY ...]): `expr` is a `Record` of the value and
    # the ORDER BY keys (`order`: per key (descending, nulls_first)); every
    # row whose record is not NULL, values NULL included, each as often as
    # its multiplicity, ordered by the keys then by the value (ascending,
    # NULLs last) so ties are the same on both engines; NULL for no rows.
    ARRAY_AGG = "array_agg"


@dataclass(frozen=True)
class AggregateExpr:
    func: AggregateFunc
    expr: ScalarExpr
    distinct: bool = False
    separator: str | None = None  # STRING_AGG only
    descending: bool = False  # STRING_AGG only
    order: tuple[tuple[bool, bool], ...] = ()  # ARRAY_AGG only

    def typ(self, input_types: tuple[ColumnType, ...]) -> ColumnType:
        inner = self.expr.typ(input_types).scalar_type
        if self.func is AggregateFunc.COUNT:
            return ColumnType(ScalarType.BIGINT, False)
        if self.func is AggregateFunc.STRING_AGG:
            return ColumnType(ScalarType.TEXT, True)
        if self.func is AggregateFunc.ARRAY_AGG:
            return ColumnType(inner.array(), True)
        if self.func is AggregateFunc.SUM:
            if inner in (ScalarType.SMALLINT, ScalarType.INTEGER):
                return ColumnType(ScalarType.BIGINT, True)
            if inner is ScalarType.BIGINT or is_integer(inner):
                return ColumnType(ScalarType.NUMERIC, True)
            if inner is ScalarType.REAL:
                return ColumnType(ScalarType.REAL, True)
            return ColumnType(inner, True)
        return ColumnType(inner, True)

    def __repr__(self) -> str:
        distinct = "distinct " if self.distinct else ""
        if self.func is AggregateFunc.STRING_AGG:
            order = " order by desc" if self.descending else ""
            return f"{self.func.value}({distinct}{self.expr!r}, {self.separator!r}{order})"
        if self.func is AggregateFunc.ARRAY_AGG:
            expr = self.expr
            if type(expr).__name__ == "If":  # FILTER: If(condition, record, NULL)
                expr = expr.children()[1]
            fields = expr.children() or (expr,)
            keys = [
                f"{key!r}{' desc' if desc else ''}{' nulls first' if first else ' nulls last'}"
                for key, (desc, first) in zip(fields[1:], self.order, strict=False)
            ]
            order = f" order by {', '.join(keys)}" if keys else ""
            return f"{self.func.value}({distinct}{fields[0]!r}{order})"
        return f"{self.func.value}({distinct}{self.expr!r})"


@dataclass(frozen=True)
class Reduce(RelationExpr):
    """GROUP BY `group_key` computing `aggregates`; output = key columns then
    one column per aggregate. With no aggregates it is DISTINCT on the key."""

    input: RelationExpr
    group_key: tuple[ScalarExpr, ...]
    aggregates: tuple[AggregateExpr, ...] = ()
    names: tuple[str, ...] = field(default=())

    @cached_property
    def desc(self) -> RelationDesc:
        input_types = self.input.desc.types
        types = [k.typ(input_types) for k in self.group_key]
        types += [a.typ(input_types) for a in self.aggregates]
        count = len(types)
        names = [self.names[i] if i < len(self.names) else f"?column{i}?" for i in range(count)]
        key = (tuple(range(len(self.group_key))),) if self.group_key else ((),)
        return RelationDesc(_unique_names(names), tuple(types), key if count else ())

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Distinct(RelationExpr):
    """Each distinct row once (SELECT DISTINCT)."""

    input: RelationExpr

    @property
    def desc(self) -> RelationDesc:
        d = self.input.desc
        return RelationDesc(d.names, d.types, (tuple(range(d.arity)),))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Union(RelationExpr):
    """UNION ALL: multiplicities add up. Inputs have the same arity."""

    inputs_: tuple[RelationExpr, ...]

    @cached_property
    def desc(self) -> RelationDesc:
        first = self.inputs_[0].desc
        columns = zip(*(child.desc.types for child in self.inputs_), strict=True)
        types = tuple(
            common_column_type(ts[0].scalar_type, any(t.nullable for t in ts), list(ts))
            for ts in columns
        )
        return RelationDesc(first.names, types)

    def inputs(self) -> tuple[RelationExpr, ...]:
        return self.inputs_


@dataclass(frozen=True)
class Negate(RelationExpr):
    """Flip every multiplicity (for EXCEPT ALL and retractions)."""

    input: RelationExpr

    @property
    def desc(self) -> RelationDesc:
        return self.input.desc

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Threshold(RelationExpr):
    """Keep rows with positive multiplicity (after Negate, EXCEPT ALL)."""

    input: RelationExpr

    @property
    def desc(self) -> RelationDesc:
        return self.input.desc

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@dataclass(frozen=True)
class OrderKey:
    """One sort key of TopK and Window: a column, ASC/DESC, NULLS FIRST/LAST."""

    column: int
    desc: bool = False
    nulls_last: bool = True

    def __repr__(self) -> str:
        direction = " desc" if self.desc else ""
        nulls = (
            ""
            if self.nulls_last != self.desc
            else (" nulls last" if self.nulls_last else " nulls first")
        )
        return f"#{self.column}{direction}{nulls}"


@dataclass(frozen=True)
class TopK(RelationExpr):
    """Per group of the `group_key` columns, the rows at positions `offset`
    to `offset + limit - 1` (all after `offset` if `limit` is None) in
    `order_key` order; a row of multiplicity n counts as n rows. Ties are
    broken by the whole row (ascending, NULLs last), so the result does not
    depend on the engine. ORDER BY ... LIMIT / OFFSET and DISTINCT ON."""

    input: RelationExpr
    group_key: tuple[int, ...]
    order_key: tuple[OrderKey, ...]
    limit: int | None = None
    offset: int = 0

    @cached_property
    def desc(self) -> RelationDesc:
        d = self.input.desc
        keys = d.keys
        if self.limit == 1:
            keys = (*keys, self.group_key)
        return RelationDesc(d.names, d.types, keys)

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


class WindowFunc(StrEnum):
    ROW_NUMBER = "row_number"
    RANK = "rank"
    DENSE_RANK = "dense_rank"
    LAG = "lag"
    LEAD = "lead"
    # Values at a position of the function's frame (NULL when it is empty).
    FIRST_VALUE = "first_value"
    LAST_VALUE = "last_value"
    NTH_VALUE = "nth_value"  # the row at `offset` (1-based)
    # Aggregates over the function's frame, as `aggregate()` computes them.
    COUNT = "count"  # count of rows where `args[0]` is not NULL
    SUM = "sum"
    MIN = "min"
    MAX = "max"
    STRING_AGG = "string_agg"
    ARRAY_AGG = "array_agg"


_WINDOW_AGGREGATES = {
    WindowFunc.COUNT: AggregateFunc.COUNT,
    WindowFunc.SUM: AggregateFunc.SUM,
    WindowFunc.MIN: AggregateFunc.MIN,
    WindowFunc.MAX: AggregateFunc.MAX,
    WindowFunc.STRING_AGG: AggregateFunc.STRING_AGG,
    WindowFunc.ARRAY_AGG: AggregateFunc.ARRAY_AGG,
}
# Functions whose value depends on the frame (PostgreSQL ignores the frame of
# the others: ranking, lag, lead).
FRAMED = frozenset(
    {WindowFunc.FIRST_VALUE, WindowFunc.LAST_VALUE, WindowFunc.NTH_VALUE, *_WINDOW_AGGREGATES}
)


class FrameMode(StrEnum):
    ROWS = "rows"  # bounds count rows (each copy of a row) from the current one
    RANGE = "range"  # bounds are distances in the one ORDER BY value; 0 is the peers


@dataclass(frozen=True)
class Frame:
    """A window frame: `start` and `end` are signed offsets from the current
    row (negative: PRECEDING, 0: CURRENT ROW, positive: FOLLOWING), None is
    UNBOUNDED. The default, RANGE UNBOUNDED PRECEDING to CURRENT ROW, is the
    partition up to the current row's last peer (all of it without ORDER BY)."""

    mode: FrameMode = FrameMode.RANGE
    start: int | Decimal | None = None
    end: int | Decimal | None = 0

    @property
    def empty(self) -> bool:
        """A ROWS frame that ends before it starts: no row's frame holds a row."""
        return (
            self.mode is FrameMode.ROWS
            and self.start is not None
            and self.end is not None
            and self.start > self.end
        )

    @property
    def name(self) -> str:
        """The kind of frame an engine renders differently (EXPLAIN, test cover)."""
        offsets = any(b not in (None, 0) for b in (self.start, self.end))
        return f"{self.mode.value} {'offset' if offsets else 'unbounded'}"

    def __repr__(self) -> str:
        def bound(b: int | Decimal | None, side: str) -> str:
            if b is None:
                return f"unbounded {side}"
            if b == 0:
                return "current row"
            return f"{abs(b)} {'preceding' if b < 0 else 'following'}"

        start, end = bound(self.start, "preceding"), bound(self.end, "following")
        return f"{self.mode.value} between {start} and {end}"


DEFAULT_FRAME = Frame()


@dataclass(frozen=True)
class WindowExpr:
    """One window function over the input's columns `args`: the value for
    lag/lead/first_value/last_value/nth_value/aggregates; for lag/lead then
    the offset's column when it is not the constant `offset`, then the
    default's column (optional). `offset` is lag/lead's constant offset or
    nth_value's n; `frame` applies to the FRAMED functions; `separator`,
    `descending` and `order` are string_agg's and array_agg's (AggregateExpr)."""

    func: WindowFunc
    args: tuple[int, ...] = ()
    offset: int | None = 1
    frame: Frame = DEFAULT_FRAME
    separator: str | None = None
    descending: bool = False
    order: tuple[tuple[bool, bool], ...] = ()

    def typ(self, input_types: tuple[ColumnType, ...]) -> ColumnType:
        if self.func in (WindowFunc.ROW_NUMBER, WindowFunc.RANK, WindowFunc.DENSE_RANK):
            return ColumnType(ScalarType.BIGINT, False)
        aggregate = self.aggregate()
        if aggregate is not None:
            return aggregate.typ(input_types)
        return ColumnType(input_types[self.args[0]].scalar_type, True)

    def aggregate(self) -> AggregateExpr | None:
        """What an aggregate computes over its frame's rows."""
        func = _WINDOW_AGGREGATES.get(self.func)
        if func is None:
            return None
        # array_agg's args are its record's fields: the value, then its ORDER BY keys
        expr: ScalarExpr = Column(self.args[0])
        if func is AggregateFunc.ARRAY_AGG:
            expr = Record(tuple(Column(a) for a in self.args))
        return AggregateExpr(
            func,
            expr,
            separator=self.separator,
            descending=self.descending,
            order=self.order,
        )

    def offset_column(self) -> int | None:
        """lag/lead's offset column, when the offset is not a constant."""
        return self.args[1] if self.offset is None else None

    def default_column(self) -> int | None:
        """lag/lead's default column, if given."""
        at = 1 if self.offset is not None else 2
        return self.args[at] if len(self.args) > at else None

    def __repr__(self) -> str:
        aggregate = self.aggregate()
        if aggregate is not None and self.func in (WindowFunc.STRING_AGG, WindowFunc.ARRAY_AGG):
            text = repr(aggregate)
        else:
            args = [f"#{a}" for a in self.args]
            if self.func in (WindowFunc.LAG, WindowFunc.LEAD) and self.offset is not None:
                args.insert(1, str(self.offset))
            if self.func is WindowFunc.NTH_VALUE:
                args.append(str(self.offset))
            text = f"{self.func.value}({', '.join(args)})"
        if self.func in FRAMED and self.frame != DEFAULT_FRAME:
            text += f" {self.frame!r}"
        return text


@dataclass(frozen=True)
class Window(RelationExpr):
    """Window functions sharing one PARTITION BY `partition_key` ORDER BY
    `order_key` (each with its own frame): every input row (each copy of a
    row of multiplicity n) with one more column per function. Rows are
    numbered in `order_key` order, ties broken by the whole row as in TopK;
    rows with equal `order_key` values are peers."""

    input: RelationExpr
    partition_key: tuple[int, ...]
    order_key: tuple[OrderKey, ...]
    functions: tuple[WindowExpr, ...]
    names: tuple[str, ...] = ()

    @cached_property
    def desc(self) -> RelationDesc:
        d = self.input.desc
        types = [f.typ(d.types) for f in self.functions]
        names = [
            self.names[i] if i < len(self.names) else f.func.value
            for i, f in enumerate(self.functions)
        ]
        return RelationDesc(_unique_names([*d.names, *names]), (*d.types, *types))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


def replace_gets(expr: RelationExpr, replace: Callable[[Get], RelationExpr | None]) -> RelationExpr:
    """`expr` with every `Get` for which `replace` returns an expression
    swapped for it (the adapter fills system relations in as Constants)."""
    if isinstance(expr, Get):
        return replace(expr) or expr
    changes: dict[str, object] = {}
    for f in dataclasses.fields(expr):  # type: ignore[arg-type]
        value = getattr(expr, f.name)
        if isinstance(value, RelationExpr):
            new = replace_gets(value, replace)
            if new is not value:
                changes[f.name] = new
        elif isinstance(value, tuple) and value and isinstance(value[0], RelationExpr):
            items = tuple(replace_gets(v, replace) for v in value)
            if any(a is not b for a, b in zip(items, value, strict=True)):
                changes[f.name] = items
    return dataclasses.replace(expr, **changes) if changes else expr  # type: ignore[type-var]
