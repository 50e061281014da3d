"""Scalar rendering on Spark where Spark's own typing differs from PostgreSQL's."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Context, Decimal

import pytest
from pyspark.sql import SparkSession

from coordinator_lib.compute.scalar import to_spark
from coordinator_lib.expr import BinaryFunc, CallBinary, Column
from coordinator_lib.repr import ColumnType, ScalarType

pytestmark = pytest.mark.spark

NUMERIC = ColumnType(ScalarType.NUMERIC, True)
WIDE = Context(prec=80)  # exact for the values here (Python's default keeps 28 digits)


def test_numeric_division_keeps_ten_places(spark: SparkSession) -> None:
    """avg is sum / count::numeric: Spark alone would keep 6 places."""
    rows = [
        (Decimal(5), Decimal(3)),
        (Decimal(-5), Decimal(3)),
        (Decimal(2), Decimal("0.0000000003")),
        (None, Decimal(3)),
        # Too wide to narrow: Spark's 6 places, no overflow error.
        (Decimal("123456789012345678901.5"), Decimal(7)),
    ]
    frame = spark.createDataFrame(rows, "c0 decimal(38,10), c1 decimal(38,10)")
    quotient = to_spark(CallBinary(BinaryFunc.DIV, Column(0), Column(1)), (NUMERIC, NUMERIC))
    got = [row[0] for row in frame.select(quotient).collect()]
    assert got == [
        Decimal("1.6666666667"),
        Decimal("-1.6666666667"),
        Decimal("6666666666.6666666667"),
        None,
        Decimal("17636684144620811271.6428570000"),
    ]


def exact(value: Decimal) -> Decimal:
    """`value` as numeric holds it: rounded half up to 10 places."""
    return value.quantize(Decimal("1e-10"), rounding=ROUND_HALF_UP, context=WIDE)


def test_numeric_addition_and_product_keep_ten_places(spark: SparkSession) -> None:
    """+, - and * of numerics give all 10 places, as PostgreSQL and the
    in-process engine do (Spark alone types decimal(38,10) + decimal(38,10)
    as decimal(38,9) and * as decimal(38,6)), for a small and a large
    factor either way round."""
    small = [Decimal("0.0000000001"), Decimal("0.0000001234"), Decimal("-1.0000000005")]
    large = [Decimal("123456789.0000000009"), Decimal("-98765432109876543.5")]
    values = small + large
    # Products past numeric's bound (10^28) are errors: left out here.
    pairs = [(a, b) for a in values for b in values if abs(a * b) < Decimal("1e28")]
    frame = spark.createDataFrame(pairs, "c0 decimal(38,10), c1 decimal(38,10)")
    got = frame.select(
        *[
            to_spark(CallBinary(func, Column(0), Column(1)), (NUMERIC, NUMERIC))
            for func in (BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL)
        ]
    ).collect()
    for (a, b), (total, difference, product) in zip(pairs, got, strict=True):
        assert total == exact(WIDE.add(a, b)), (a, b)
        assert difference == exact(WIDE.subtract(a, b)), (a, b)
        # Exact while the factors' integer digits fit 18 between them (one
        # below 10^9 and the other too, or one below 10 and the other below
        # 10^17); larger products keep Spark's 6 places.
        lo, hi = sorted((abs(a), abs(b)))
        fits = hi < Decimal("1e9") or (lo < 10 and hi < Decimal("1e17"))
        error = WIDE.abs(WIDE.subtract(product, exact(WIDE.multiply(a, b))))
        assert error <= (0 if fits else Decimal("1e-6")), (a, b)


def test_raise_error_fails_only_where_evaluated(spark: SparkSession) -> None:
    """RaiseError (a scalar subquery's second row) fails the job with its
    message and SQLSTATE, and only on rows that reach it."""
    from pyspark.errors import PySparkException

    from coordinator_lib.expr import If, Literal, RaiseError

    integer = ColumnType(ScalarType.INTEGER, True)
    error = RaiseError("21000", "more than one record produced in subquery", integer)
    guarded = If(
        CallBinary(BinaryFunc.GT, Column(0), Literal(1, ColumnType(ScalarType.INTEGER, False))),
        error,
        Column(0),
    )
    frame = spark.createDataFrame([(1,), (0,)], "c0 int")
    assert [r[0] for r in frame.select(to_spark(guarded, (integer,))).collect()] == [1, 0]
    failing = spark.createDataFrame([(1,), (2,)], "c0 int").select(to_spark(guarded, (integer,)))
    with pytest.raises(PySparkException, match="more than one record produced in subquery"):
        failing.collect()
    with pytest.raises(PySparkException, match="21000"):
        failing.collect()
