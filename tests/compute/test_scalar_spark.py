"""Scalar rendering on Spark where Spark's own typing differs from PostgreSQL's."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pyspark.sql import SparkSession

from coordinator_lib.compute.scalar import to_spark
from coordinator_lib.expr import BinaryFunc, CallBinary, Column
from coordinator_lib.repr import ColumnType, ScalarType

pytestmark = pytest.mark.spark

NUMERIC = ColumnType(ScalarType.NUMERIC, True)


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
