"""mz_now() and temporal filters in the plan language.

`MzNow(type)` is the time a query reads at, as a value of `type`: the
planner gives it the type of what it is compared with (a timestamp column
makes it the timestamp `t` milliseconds after the epoch, a numeric one the
number `t`), so a comparison is exact in that type. Alone (`SELECT mz_now()`)
it is a bigint. Materialize's type for it is `mz_timestamp`; Tidemark has no
such type (timestamps are int milliseconds, see repr/timestamp.py).

A one-off query replaces every MzNow with its timestamp as a literal
(`substitute_mz_now`) before evaluating. A maintained view cannot: its
contents change as time passes. There the planner (sql/temporal.py) turns
the mz_now() comparisons of a Filter into a `TemporalFilter`, whose rows
appear at `max(t, L)` and disappear at `U` (compute/temporal.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
from collections.abc import Iterator
from dataclasses import dataclass, field

from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.expr.scalar import BinaryFunc, Literal, ScalarExpr
from coordinator_lib.repr.relation import ColumnType, RelationDesc, ScalarType

EPOCH = dt.datetime(1970, 1, 1)
EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# The types mz_now() can be compared with (others are cast to one of these).
COMPARABLE = (ScalarType.BIGINT, ScalarType.NUMERIC, ScalarType.TIMESTAMP, ScalarType.TIMESTAMPTZ)


@dataclass(frozen=True)
class MzNow(ScalarExpr):
    """The query's timestamp as a value of `scalar_type` (one of COMPARABLE).
    `position` is where the call was written (for errors; not compared)."""

    scalar_type: ScalarType = ScalarType.BIGINT
    position: int | None = field(default=None, compare=False)

    def typ(self, column_types: tuple[ColumnType, ...]) -> ColumnType:
        return ColumnType(self.scalar_type, False)

    def __repr__(self) -> str:
        return "mz_now()"


# mz_now() `func` expr, for the functions a temporal filter takes.
FLIPPED = {
    BinaryFunc.EQ: BinaryFunc.EQ,
    BinaryFunc.LT: BinaryFunc.GT,
    BinaryFunc.LTE: BinaryFunc.GTE,
    BinaryFunc.GT: BinaryFunc.LT,
    BinaryFunc.GTE: BinaryFunc.LTE,
}
_SYMBOLS = {
    BinaryFunc.EQ: "=",
    BinaryFunc.LT: "<",
    BinaryFunc.LTE: "<=",
    BinaryFunc.GT: ">",
    BinaryFunc.GTE: ">=",
}


@dataclass(frozen=True)
class TemporalBound:
    """`mz_now() func expr`: a lower bound (>, >=), an upper bound (<, <=) or
    both (=) on the times a row is present."""

    func: BinaryFunc
    expr: ScalarExpr

    def __repr__(self) -> str:
        return f"mz_now() {_SYMBOLS[self.func]} {self.expr!r}"


@dataclass(frozen=True)
class TemporalFilter(RelationExpr):
    """Rows of `input` while every bound holds: a row with update (r, t, d)
    is present from max(t, L(r)) until U(r) (exclusive), where L is the
    greatest lower bound and U the least upper bound on mz_now() (no bound:
    unbounded); a row whose bound is NULL is never present."""

    input: RelationExpr
    bounds: tuple[TemporalBound, ...]

    @property
    def desc(self) -> RelationDesc:
        return self.input.desc

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


def mz_now_value(timestamp: int, scalar_type: ScalarType) -> object:
    """The time `timestamp` (ms since the epoch) as a value of `scalar_type`."""
    if scalar_type is ScalarType.TIMESTAMP:
        return EPOCH + dt.timedelta(milliseconds=timestamp)
    if scalar_type is ScalarType.TIMESTAMPTZ:
        return EPOCH_UTC + dt.timedelta(milliseconds=timestamp)
    if scalar_type is ScalarType.NUMERIC:
        return decimal.Decimal(timestamp)
    return timestamp


def scalar_nodes(expr: ScalarExpr) -> Iterator[ScalarExpr]:
    yield expr
    for child in expr.children():
        yield from scalar_nodes(child)


def mz_now_calls(value: object) -> Iterator[MzNow]:
    """Every MzNow in a field value of a relation node (scalars, tuples,
    aggregates and other dataclasses holding scalars; not into child
    relations)."""
    if isinstance(value, MzNow):
        yield value
    elif isinstance(value, ScalarExpr):
        for child in value.children():
            yield from mz_now_calls(child)
        # Scalars holding plans (subquery placeholders) hold them as fields.
    elif isinstance(value, tuple | list):
        for item in value:
            yield from mz_now_calls(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type | RelationExpr):
        for f in dataclasses.fields(value):
            yield from mz_now_calls(getattr(value, f.name))


def node_mz_now_calls(node: RelationExpr) -> list[MzNow]:
    """The MzNow calls in one operator's own scalars (not its inputs')."""
    found: list[MzNow] = []
    for f in dataclasses.fields(node):  # type: ignore[arg-type]
        value = getattr(node, f.name)
        if isinstance(value, RelationExpr) or (
            isinstance(value, tuple) and value and isinstance(value[0], RelationExpr)
        ):
            continue
        found += mz_now_calls(value)
    return found


def contains_mz_now(expr: RelationExpr) -> bool:
    if node_mz_now_calls(expr):
        return True
    return any(contains_mz_now(child) for child in expr.inputs())


def first_mz_now(expr: RelationExpr) -> MzNow | None:
    calls = node_mz_now_calls(expr)
    if calls:
        return calls[0]
    for child in expr.inputs():
        found = first_mz_now(child)
        if found is not None:
            return found
    return None


def _rewrite(value: object, timestamp: int) -> object:
    if isinstance(value, MzNow):
        return Literal(mz_now_value(timestamp, value.scalar_type), value.typ(()))
    if isinstance(value, tuple):
        items = tuple(_rewrite(v, timestamp) for v in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            old = getattr(value, f.name)
            new = _rewrite(old, timestamp)
            if new is not old:
                changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value


def substitute_mz_now(expr: RelationExpr, timestamp: int) -> RelationExpr:
    """`expr` with every mz_now() replaced by `timestamp` (a one-off query
    reads at one time, so mz_now() is a constant there)."""
    if not contains_mz_now(expr):
        return expr
    out = _rewrite(expr, timestamp)
    assert isinstance(out, RelationExpr)
    return out


__all__ = [
    "COMPARABLE",
    "FLIPPED",
    "MzNow",
    "TemporalBound",
    "TemporalFilter",
    "contains_mz_now",
    "first_mz_now",
    "mz_now_value",
    "substitute_mz_now",
]
