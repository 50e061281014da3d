"""Temporal filters (expr/temporal.py TemporalFilter): when a row is present.

A row is present from max(t, L) until U (exclusive), where t is its update's
time and L, U the least and greatest times (ms) the row's bounds allow:
`mz_now() >= e` gives L = ceil(e), `mz_now() > e` L = floor(e) + 1,
`mz_now() <= e` U = floor(e) + 1, `mz_now() < e` U = ceil(e), `=` both (a
timestamp `e` counts in milliseconds since the epoch, with its microseconds
as a fraction). So an update (r, t, d) becomes (r, max(t, L), d) and
(r, U, -d), or nothing when max(t, L) >= U.

Those times may lie past the step's upper, where the output cannot be
written yet. Nothing pending is stored: a step over [lower, upper) derives
its changes from the input's delta (its updates' insertions and retractions
that fall in the step) and from the input's old contents (the rows already
there whose L or U falls in the step). So a view steps, and changes, when
its inputs' uppers pass a pending time although no input row changed; the
cost is reading the input's old contents at every step, as Reduce does.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Callable
from fractions import Fraction
from functools import reduce

from pyspark.sql import Column as SparkColumn
from pyspark.sql import functions as F

from coordinator_lib.compute.local_scalar import eval_scalar
from coordinator_lib.compute.scalar import to_spark
from coordinator_lib.expr.scalar import BinaryFunc
from coordinator_lib.expr.temporal import EPOCH, EPOCH_UTC, TemporalBound
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.repr.update import Row

_LOWER = (BinaryFunc.GTE, BinaryFunc.GT, BinaryFunc.EQ)
_UPPER = (BinaryFunc.LTE, BinaryFunc.LT, BinaryFunc.EQ)
_MICROS = dt.timedelta(microseconds=1)

# (present, L, U): whether the row is ever present, and its bounds (None: unbounded).
Window = tuple[bool, int | None, int | None]


def exact_ms(value: object, scalar_type: ScalarType) -> Fraction:
    """A bound's value as an exact number of milliseconds since the epoch."""
    if scalar_type is ScalarType.TIMESTAMP:
        assert isinstance(value, dt.datetime)
        return Fraction((value - EPOCH) // _MICROS, 1000)
    if scalar_type is ScalarType.TIMESTAMPTZ:
        assert isinstance(value, dt.datetime)
        return Fraction((value - EPOCH_UTC) // _MICROS, 1000)
    if isinstance(value, decimal.Decimal):
        return Fraction(value)
    assert isinstance(value, int)
    return Fraction(value)


def bound_limits(func: BinaryFunc, ms: Fraction) -> tuple[int | None, int | None]:
    """(L, U) of `mz_now() func ms` over integer times."""
    lower = upper = None
    if func in (BinaryFunc.GTE, BinaryFunc.EQ):
        lower = math.ceil(ms)
    if func is BinaryFunc.GT:
        lower = math.floor(ms) + 1
    if func in (BinaryFunc.LTE, BinaryFunc.EQ):
        upper = math.floor(ms) + 1
    if func is BinaryFunc.LT:
        upper = math.ceil(ms)
    return lower, upper


def row_window(
    bounds: tuple[TemporalBound, ...], row: Row, types: tuple[ColumnType, ...]
) -> Window:
    lower: int | None = None
    upper: int | None = None
    for bound in bounds:
        value = eval_scalar(bound.expr, row, types)
        if value is None:
            return False, None, None
        lo, hi = bound_limits(bound.func, exact_ms(value, bound.expr.typ(types).scalar_type))
        if lo is not None:
            lower = lo if lower is None else max(lower, lo)
        if hi is not None:
            upper = hi if upper is None else min(upper, hi)
    present = lower is None or upper is None or lower < upper
    return present, lower, upper


# ----------------------------------------------------------------------- Spark
def _micros(column: SparkColumn, scalar_type: ScalarType) -> SparkColumn:
    if scalar_type is ScalarType.TIMESTAMP:  # TimestampNTZ; the session time zone is UTC
        column = column.cast("timestamp")
    return F.unix_micros(column)


def _spark_limits(
    bound: TemporalBound, types: tuple[ColumnType, ...]
) -> tuple[SparkColumn | None, SparkColumn | None, SparkColumn]:
    """(L, U, value is not NULL) of one bound as Spark columns (longs)."""
    value = to_spark(bound.expr, types)
    scalar_type = bound.expr.typ(types).scalar_type
    if scalar_type in (ScalarType.TIMESTAMP, ScalarType.TIMESTAMPTZ):
        micros = _micros(value, scalar_type)
        rest = F.pmod(micros, F.lit(1000))
        # An exact multiple of 1000 (below 2**53) divides exactly.
        floor = ((micros - rest) / F.lit(1000)).cast("long")
        ceil = floor + F.when(rest != 0, F.lit(1)).otherwise(F.lit(0)).cast("long")
    elif scalar_type is ScalarType.NUMERIC:
        floor, ceil = F.floor(value).cast("long"), F.ceil(value).cast("long")
    else:
        floor = ceil = value.cast("long")
    lower = upper = None
    func = bound.func
    if func in (BinaryFunc.GTE, BinaryFunc.EQ):
        lower = ceil
    if func is BinaryFunc.GT:
        lower = floor + 1
    if func in (BinaryFunc.LTE, BinaryFunc.EQ):
        upper = floor + 1
    if func is BinaryFunc.LT:
        upper = ceil
    return lower, upper, value.isNotNull()


def _combine(columns: list[SparkColumn], pick: Callable[..., SparkColumn]) -> SparkColumn:
    if not columns:
        return F.lit(None).cast("long")
    return columns[0] if len(columns) == 1 else pick(*columns)


def spark_bounds(
    bounds: tuple[TemporalBound, ...], types: tuple[ColumnType, ...]
) -> tuple[SparkColumn, SparkColumn, SparkColumn]:
    """(L, U, every bound's value is not NULL) of a row as Spark columns
    (L, U NULL: unbounded)."""
    lowers, uppers, valids = [], [], []
    for bound in bounds:
        lo, hi, valid = _spark_limits(bound, types)
        if lo is not None:
            lowers.append(lo)
        if hi is not None:
            uppers.append(hi)
        valids.append(valid)
    return (
        _combine(lowers, F.greatest),
        _combine(uppers, F.least),
        reduce(lambda a, b: a & b, valids),
    )


__all__ = [
    "bound_limits",
    "exact_ms",
    "row_window",
    "spark_bounds",
]
