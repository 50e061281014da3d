"""Math functions with PostgreSQL's semantics: round, ceil, floor, sqrt,
power, ln, exp, log, trunc, sign, pi, div, gcd.

Arguments arrive converted to the overload's types by the binder: a float
argument is a Python float, numeric a Decimal, so `round(x)` knows its
overload from the value. numeric sqrt, power, ln, exp and log are computed
in double precision (both engines). Spark's round of a double is half to
even (`bround`), its ceil/floor return a bigint: the builders below keep
PostgreSQL's; the others run on Spark as UDFs of the Python implementation.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable

from pyspark.sql import Column as SparkColumn
from pyspark.sql import functions as F
from pyspark.sql import types as T

from coordinator_lib.expr.functions.registry import FunctionError, SparkCall, scalar_function, sig
from coordinator_lib.expr.functions.spark import spark_error
from coordinator_lib.repr.numeric import NumericFieldOverflow, to_numeric
from coordinator_lib.repr.relation import ScalarType

S = ScalarType
FLOAT_OR_NUMERIC = (sig(S.DOUBLE, result=S.DOUBLE), sig(S.NUMERIC, result=S.NUMERIC))
NUMERIC_SCALE = decimal.Decimal(1).scaleb(-10)
_CONTEXT = decimal.Context(prec=60, rounding=decimal.ROUND_HALF_UP)
_BIG = 2.0**52  # doubles at least this large are integers already


def numeric_result(value: decimal.Decimal) -> decimal.Decimal:
    """`value` in numeric's bound (repr/numeric.py), overflow as 22003."""
    try:
        return to_numeric(value)
    except NumericFieldOverflow as error:
        raise FunctionError(error.message, error.code) from None


def _from_float(value: float) -> decimal.Decimal:
    if not math.isfinite(value):
        raise FunctionError("cannot convert infinity or NaN to numeric", "22003")
    return numeric_result(decimal.Decimal(repr(value)))


def _integral_column(name: str, x: SparkColumn, st: ScalarType, out: T.DataType) -> SparkColumn:
    if st is S.NUMERIC:
        if name == "round":
            return F.round(x, 0).cast(out)
        return (F.ceil(x) if name == "ceil" else F.floor(x)).cast(out)
    if name == "round":
        rounded = F.bround(x, 0)
    else:
        rounded = (F.ceil(x) if name == "ceil" else F.floor(x)).cast("double")
    return F.when(F.isnan(x) | (F.abs(x) >= F.lit(_BIG)), x).otherwise(rounded).cast(out)


def _integral_spark(name: str) -> Callable[[SparkCall], SparkColumn]:
    return lambda c: _integral_column(name, c.args[0], c.types[0].scalar_type, c.out)


@scalar_function("round", *FLOAT_OR_NUMERIC, spark=_integral_spark("round"))
def round_(x: float | decimal.Decimal) -> float | decimal.Decimal:
    """round(double) rounds half to even (rint); round(numeric) half away from zero."""
    if isinstance(x, decimal.Decimal):
        return numeric_result(x.quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP))
    if not math.isfinite(x):
        return x
    return float(round(x))


@scalar_function(
    "round_to",
    sig(S.NUMERIC, S.INTEGER, result=S.NUMERIC),
    sql=("round",),
    spark=lambda c: F.round(c.args[0], int(c.constant(1))).cast(c.out),
)
def round_to(x: decimal.Decimal, places: int) -> decimal.Decimal:
    exponent = decimal.Decimal(1).scaleb(-places)
    return numeric_result(x.quantize(exponent, rounding=decimal.ROUND_HALF_UP, context=_CONTEXT))


def _integral(x: float | decimal.Decimal, rounding: str) -> float | decimal.Decimal:
    if isinstance(x, decimal.Decimal):
        return numeric_result(x.quantize(decimal.Decimal(1), rounding=rounding))
    if not math.isfinite(x):
        return x
    return float(math.ceil(x) if rounding == decimal.ROUND_CEILING else math.floor(x))


@scalar_function("ceil", *FLOAT_OR_NUMERIC, spark=_integral_spark("ceil"))
def ceil(x: float | decimal.Decimal) -> float | decimal.Decimal:
    return _integral(x, decimal.ROUND_CEILING)


@scalar_function("floor", *FLOAT_OR_NUMERIC, spark=_integral_spark("floor"))
def floor(x: float | decimal.Decimal) -> float | decimal.Decimal:
    return _integral(x, decimal.ROUND_FLOOR)


def _sqrt(x: SparkColumn, out: T.DataType) -> SparkColumn:
    error = spark_error("cannot take square root of a negative number", "2201F", out)
    return F.when(x < 0, error).otherwise(F.sqrt(x.cast("double")).cast(out))


@scalar_function("sqrt", *FLOAT_OR_NUMERIC, spark=lambda c: _sqrt(c.args[0], c.out))
def sqrt(x: float | decimal.Decimal) -> float | decimal.Decimal:
    """numeric's square root is computed in double precision (both engines)."""
    if x < 0:
        raise FunctionError("cannot take square root of a negative number", "2201F")
    if isinstance(x, decimal.Decimal):
        return _from_float(math.sqrt(float(x)))
    return math.sqrt(x)


def _power(a: SparkColumn, b: SparkColumn, out: T.DataType) -> SparkColumn:
    fa, fb = a.cast("double"), b.cast("double")
    result = F.pow(fa, fb)
    finite = ~F.isnan(fa) & ~F.isnan(fb) & (F.abs(fa) < F.lit(float("inf")))
    finite = finite & (F.abs(fb) < F.lit(float("inf")))
    return (
        F.when(
            (fa == 0) & (fb < 0),
            spark_error("zero raised to a negative power is undefined", "2201F", T.DoubleType()),
        )
        .when(
            (fa < 0) & finite & (fb != F.floor(fb).cast("double")),
            spark_error(
                "a negative number raised to a non-integer power yields a complex result",
                "2201F",
                T.DoubleType(),
            ),
        )
        .when(
            finite & (F.abs(result) == F.lit(float("inf"))),
            spark_error("value out of range: overflow", "22003", T.DoubleType()),
        )
        .when(
            finite & (result == 0) & (fa != 0),
            spark_error("value out of range: underflow", "22003", T.DoubleType()),
        )
        .otherwise(result)
        .cast(out)
    )


@scalar_function(
    "power",
    sig(S.DOUBLE, S.DOUBLE, result=S.DOUBLE),
    sig(S.NUMERIC, S.NUMERIC, result=S.NUMERIC),
    spark=lambda c: _power(c.args[0], c.args[1], c.out),
)
def power(a: float | decimal.Decimal, b: float | decimal.Decimal) -> float | decimal.Decimal:
    """numeric's power is computed in double precision (both engines)."""
    numeric = isinstance(a, decimal.Decimal)
    fa, fb = float(a), float(b)
    if fa == 0 and fb < 0:
        raise FunctionError("zero raised to a negative power is undefined", "2201F")
    if fa < 0 and math.isfinite(fb) and fb != math.floor(fb):
        raise FunctionError(
            "a negative number raised to a non-integer power yields a complex result", "2201F"
        )
    try:
        result = math.pow(fa, fb)
    except OverflowError:
        raise FunctionError("value out of range: overflow", "22003") from None
    if math.isinf(result) and math.isfinite(fa) and math.isfinite(fb):
        raise FunctionError("value out of range: overflow", "22003")
    if result == 0 and fa != 0 and math.isfinite(fa) and math.isfinite(fb):
        raise FunctionError("value out of range: underflow", "22003")
    return _from_float(result) if numeric else result


def _log_checked(x: float | decimal.Decimal) -> None:
    if x == 0:
        raise FunctionError("cannot take logarithm of zero", "2201E")
    if x < 0:
        raise FunctionError("cannot take logarithm of a negative number", "2201E")


@scalar_function("ln", *FLOAT_OR_NUMERIC)
def ln(x: float | decimal.Decimal) -> float | decimal.Decimal:
    _log_checked(x)
    if isinstance(x, decimal.Decimal):
        return _from_float(math.log(float(x)))
    return math.log(x) if math.isfinite(x) else x


@scalar_function("log10", *FLOAT_OR_NUMERIC, sql=("log",))
def log10(x: float | decimal.Decimal) -> float | decimal.Decimal:
    _log_checked(x)
    if isinstance(x, decimal.Decimal):
        return _from_float(math.log10(float(x)))
    return math.log10(x) if math.isfinite(x) else x


@scalar_function("log_base", sig(S.NUMERIC, S.NUMERIC, result=S.NUMERIC), sql=("log",))
def log_base(base: decimal.Decimal, x: decimal.Decimal) -> decimal.Decimal:
    """log(b, x) (numeric only in PostgreSQL)."""
    _log_checked(base)
    _log_checked(x)
    if base == 1:
        raise FunctionError("division by zero", "22012")
    return _from_float(math.log(float(x)) / math.log(float(base)))


@scalar_function("exp", *FLOAT_OR_NUMERIC)
def exp(x: float | decimal.Decimal) -> float | decimal.Decimal:
    numeric = isinstance(x, decimal.Decimal)
    fx = float(x)
    if math.isnan(fx):
        return x
    try:
        result = math.exp(fx)
    except OverflowError:
        raise FunctionError("value out of range: overflow", "22003") from None
    if result == 0 and not numeric and math.isfinite(fx):
        raise FunctionError("value out of range: underflow", "22003")
    return _from_float(result) if numeric else result


@scalar_function("trunc", *FLOAT_OR_NUMERIC)
def trunc(x: float | decimal.Decimal) -> float | decimal.Decimal:
    if isinstance(x, decimal.Decimal):
        return numeric_result(x.quantize(decimal.Decimal(1), rounding=decimal.ROUND_DOWN))
    if not math.isfinite(x):
        return x
    return float(math.trunc(x))


@scalar_function("trunc_to", sig(S.NUMERIC, S.INTEGER, result=S.NUMERIC), sql=("trunc",))
def trunc_to(x: decimal.Decimal, places: int) -> decimal.Decimal:
    exponent = decimal.Decimal(1).scaleb(-places)
    context = decimal.Context(prec=60)
    return numeric_result(x.quantize(exponent, rounding=decimal.ROUND_DOWN, context=context))


@scalar_function("sign", *FLOAT_OR_NUMERIC)
def sign(x: float | decimal.Decimal) -> float | decimal.Decimal:
    if isinstance(x, decimal.Decimal):
        return numeric_result(decimal.Decimal((x > 0) - (x < 0)))
    if math.isnan(x):
        return x
    return float((x > 0) - (x < 0))


@scalar_function("pi", sig(result=S.DOUBLE))
def pi() -> float:
    return math.pi


@scalar_function("div", sig(S.NUMERIC, S.NUMERIC, result=S.NUMERIC))
def div(a: decimal.Decimal, b: decimal.Decimal) -> decimal.Decimal:
    if b == 0:
        raise FunctionError("division by zero", "22012")
    quotient = (a / b).quantize(decimal.Decimal(1), rounding=decimal.ROUND_DOWN)
    return quotient.quantize(NUMERIC_SCALE)


def _gcd(a: int, b: int, type_name: str, bound: int) -> int:
    result = math.gcd(a, b)  # never negative; gcd(0, 0) is 0
    if result >= bound:  # gcd(-2^31, 0) is 2^31, beyond integer
        raise FunctionError(f"{type_name} out of range", "22003")
    return result


@scalar_function("gcd", sig(S.INTEGER, S.INTEGER, result=S.INTEGER))
def gcd(a: int, b: int) -> int:
    return _gcd(a, b, "integer", 2**31)


@scalar_function("gcd_bigint", sig(S.BIGINT, S.BIGINT, result=S.BIGINT), sql=("gcd",))
def gcd_bigint(a: int, b: int) -> int:
    return _gcd(a, b, "bigint", 2**63)
