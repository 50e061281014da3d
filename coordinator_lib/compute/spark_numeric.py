"""numeric arithmetic on Spark with all of numeric's 10 decimal places.

Tidemark's numeric is decimal(38, 10) on both engines. Spark types an
operation on two decimals by its precision-loss rule: when the exact result
needs more than 38 digits it keeps at least 6 places and drops the rest, so
decimal(38,10) + decimal(38,10) is decimal(38,9), * decimal(38,6), and
decimal(38,10) * bigint (a value times its multiplicity, in every SUM)
decimal(38,6), where the in-process engine (Python's Decimal) and
PostgreSQL keep every place. Each operation here narrows its operands to
types whose exact result fits 38 digits when their values allow it, and
only values too large for that keep Spark's places (the branch not taken is
not run). Past numeric's bound an operation fails the job as ANSI mode's
cast does (spark_errors.py replans it with exact errors); a SUM's product
is NULL there instead, for the sum's own overflow check.
"""

from __future__ import annotations

from decimal import Decimal

from pyspark.sql import Column as SparkColumn
from pyspark.sql import functions as F
from pyspark.sql import types as T

NUMERIC = T.DecimalType(38, 10)
SCALE = NUMERIC.scale


def _below(value: SparkColumn, digits: int) -> SparkColumn:
    """|value| < 10^digits: it fits decimal(digits + 10, 10)."""
    return F.abs(value) < F.lit(Decimal(10) ** digits)  # an int past 2^63 is no literal


def _narrow(value: SparkColumn, digits: int) -> SparkColumn:
    return value.cast(T.DecimalType(digits + SCALE, SCALE))


def numeric_add(left: SparkColumn, right: SparkColumn, negate: bool = False) -> SparkColumn:
    """left + right (left - right with `negate`): exact below 10^27 each,
    as decimal(37,10) + decimal(37,10) is decimal(38,10)."""
    a, b = _narrow(left, 27), _narrow(right, 27)
    exact = a - b if negate else a + b
    spark = left - right if negate else left + right
    fits = _below(left, 27) & _below(right, 27)
    return F.when(fits, exact).otherwise(spark.cast(NUMERIC))


# Integer digits (left, right) the exact product decimal(38, 20) has room
# for: 18 between them, tried in turn, so a small factor times a large one
# (an amount times a rate) is exact too.
_PRODUCT_SPLITS = ((9, 9), (17, 1), (1, 17), (13, 5), (5, 13))


def numeric_mul(left: SparkColumn, right: SparkColumn) -> SparkColumn:
    """left * right rounded to 10 places (half up, as a cast): exact
    whenever the operands' integer digits fit one of `_PRODUCT_SPLITS`
    (decimal(x+10,10) * decimal(y+10,10) with x + y = 18 is decimal(38,20),
    exactly); larger products keep Spark's 6 places."""
    result = None
    for x, y in _PRODUCT_SPLITS:
        fits = _below(left, x) & _below(right, y)
        exact = (_narrow(left, x) * _narrow(right, y)).cast(NUMERIC)
        result = F.when(fits, exact) if result is None else result.when(fits, exact)
    assert result is not None
    return result.otherwise((left * right).cast(NUMERIC))


def numeric_div(left: SparkColumn, right: SparkColumn) -> SparkColumn:
    """left / right with 10 places (avg too): decimal(28,10) / decimal(38,10)
    is decimal(38,10), rounded half up like a cast, for dividends below
    10^18; larger ones keep Spark's 6 places."""
    exact = (_narrow(left, 18) / right).cast(NUMERIC)
    return F.when(_below(left, 18), exact).otherwise((left / right).cast(NUMERIC))


def times_count(value: SparkColumn, count: SparkColumn) -> SparkColumn:
    """A numeric value times its multiplicity (a bigint), as a SUM adds it:
    a count of 1 or -1 is the value itself; below 10^18 times a count below
    10^9, decimal(28,10) * decimal(9,0) is decimal(38,10) exactly; NULL
    past numeric's bound (`spark_aggregates.sum_overflow` reports it)."""
    exact = _narrow(value, 18) * count.cast(T.DecimalType(9, 0))
    fits = _below(value, 18) & _below(count, 9)
    return (
        F.when(count == 1, value)
        .when(count == -1, -value)
        .when(fits, exact)
        .otherwise((value * count).try_cast(NUMERIC))
    )
