"""A float SUM that does not depend on the order of its values.

A float sum added up row by row depends on the order the rows come in: a
group recomputed from its rows in another order, or kept as a running sum,
gives a value a few ulps off the one its view holds, and a step retracting
it leaves a stray row. Here the sum is the exact sum of the values rounded
once (IEEE round-half-even), so it is a function of the group's multiset of
values alone: `float_sum` over a group's values (math.fsum, which is
correctly rounded) and the running `FloatSum` of an in-process Reduce's
accumulators (compute/local_groups.py: the exact sum of the finite values as
a Fraction, and counts of infinities and NaNs) always agree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

# A group's float sum kept running: (the exact sum of its finite values,
# how many +inf, -inf and NaN values it holds).
FloatSum = tuple[Fraction, int, int, int]
ZERO: FloatSum = (Fraction(0), 0, 0, 0)


def add(total: FloatSum, value: float, diff: int) -> FloatSum:
    """`total` with `diff` more copies of `value`."""
    finite, pos, neg, nan = total
    if math.isnan(value):
        return (finite, pos, neg, nan + diff)
    if math.isinf(value):
        return (finite, pos + diff, neg, nan) if value > 0 else (finite, pos, neg + diff, nan)
    return (finite + Fraction(value) * diff, pos, neg, nan)


def result(total: FloatSum) -> float:
    """The sum as IEEE arithmetic gives it without rounding on the way:
    NaN with a NaN or both infinities, an infinity with one, else the exact
    sum rounded once (OverflowError beyond a double)."""
    finite, pos, neg, nan = total
    if nan > 0 or (pos > 0 and neg > 0):
        return math.nan
    if pos > 0 or neg > 0:
        return math.inf if pos > 0 else -math.inf
    return float(finite)


def float_sum(values: Iterable[float]) -> float:
    """`result` of the values' FloatSum, fast: math.fsum is correctly
    rounded too; an intermediate overflow or a non-finite value takes the
    exact path. OverflowError when the sum is beyond a double."""
    values = list(values)
    try:
        return math.fsum(values)
    except (OverflowError, ValueError):
        total = ZERO
        for value in values:
            total = add(total, value, 1)
        return result(total)
