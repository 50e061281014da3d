"""The built-in functions of `expr/functions.py` as Spark Columns, with
PostgreSQL's semantics (the Python ones are `compute/local_builtins.py`).

Where Spark's function differs from PostgreSQL's it is not used as is:
substring's start before 1, left/right with a negative count, round of a
double (half to even: `bround`), ceil/floor of a double (Spark's return a
bigint), errors Spark would answer with NULL or NaN (`raise_error` with the
SQLSTATE, as `RaiseError` does).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import functions as F
from pyspark.sql import types as T

from coordinator_lib.compute.local_builtins import normalize_unit
from coordinator_lib.expr.functions import (
    JSONB_FUNCTIONS,
    NULL_TOLERANT,
    PYTHON_BUILTINS,
    CallFunction,
)
from coordinator_lib.expr.scalar import Literal
from coordinator_lib.persist.spark_batches import spark_type
from coordinator_lib.repr.relation import ColumnType, ScalarType

S = ScalarType
_BIG = 2.0**52  # doubles at least this large are integers already


def _error(message: str, code: str, to: T.DataType) -> SparkColumn:
    return F.raise_error(F.lit(f"{message} (SQLSTATE {code})")).cast(to)


def _long(column: SparkColumn) -> SparkColumn:
    return column.cast("long")


def _substring(args: list[SparkColumn]) -> SparkColumn:
    text, start = args[0], _long(args[1])
    begin = F.greatest(start, F.lit(1).cast("long"))
    if len(args) == 2:
        return F.substring(text, begin.cast("int"), F.lit(2**31 - 1))
    length = _long(args[2])
    count = F.greatest(start + length - begin, F.lit(0).cast("long"))
    result = F.substring(text, begin.cast("int"), F.least(count, F.lit(2**31 - 1)).cast("int"))
    negative = _error("negative substring length not allowed", "22011", T.StringType())
    return F.when(length < 0, negative).otherwise(result)


def _left(text: SparkColumn, n: SparkColumn) -> SparkColumn:
    count = F.when(n >= 0, n).otherwise(F.greatest(F.char_length(text) + n, F.lit(0)))
    return F.substring(text, 1, count)


def _right(text: SparkColumn, n: SparkColumn) -> SparkColumn:
    length = F.char_length(text)
    start = F.when(n >= 0, F.greatest(length - n + 1, F.lit(1))).otherwise(-n + 1)
    count = F.when(n >= 0, F.least(n, length)).otherwise(F.greatest(length + n, F.lit(0)))
    return F.when(count <= 0, F.lit("")).otherwise(F.substring(text, start, count))


def _pad(name: str, args: list[SparkColumn]) -> SparkColumn:
    fill = args[2] if len(args) == 3 else F.lit(" ")
    text, n = args[0], args[1]
    padded = F.call_function(name, text, n, fill)
    # PostgreSQL: an empty fill truncates but never pads.
    empty = F.when(n <= 0, F.lit("")).otherwise(F.substring(text, 1, n))
    return F.when(fill == "", empty).otherwise(padded)


def _trim(name: str, args: list[SparkColumn]) -> SparkColumn:
    chars = args[1] if len(args) == 2 else F.lit(" ")
    if name == "btrim":
        trimmed = F.btrim(args[0], chars)
    elif name == "ltrim":
        trimmed = F.ltrim(args[0], chars)
    else:
        trimmed = F.rtrim(args[0], chars)
    return F.when(chars == "", args[0]).otherwise(trimmed)


def _split_part(args: list[SparkColumn]) -> SparkColumn:
    text, delimiter, n = args
    zero = _error("field position must not be zero", "22023", T.StringType())
    whole = F.when((n == 1) | (n == -1), text).otherwise(F.lit(""))
    split = F.split_part(text, delimiter, n)
    return F.when(n == 0, zero).when(delimiter == "", whole).otherwise(split)


def _integral(name: str, x: SparkColumn, st: ScalarType, out: T.DataType) -> SparkColumn:
    if st is S.NUMERIC:
        if name == "round":
            return F.round(x, 0).cast(out)
        return (F.ceil(x) if name == "ceil" else F.floor(x)).cast(out)
    if name == "round":
        rounded = F.bround(x, 0)
    else:
        rounded = (F.ceil(x) if name == "ceil" else F.floor(x)).cast("double")
    return F.when(F.isnan(x) | (F.abs(x) >= F.lit(_BIG)), x).otherwise(rounded).cast(out)


def _sqrt(x: SparkColumn, out: T.DataType) -> SparkColumn:
    error = _error("cannot take square root of a negative number", "2201F", out)
    return F.when(x < 0, error).otherwise(F.sqrt(x.cast("double")).cast(out))


def _power(a: SparkColumn, b: SparkColumn, out: T.DataType) -> SparkColumn:
    fa, fb = a.cast("double"), b.cast("double")
    result = F.pow(fa, fb)
    finite = ~F.isnan(fa) & ~F.isnan(fb) & (F.abs(fa) < F.lit(float("inf")))
    finite = finite & (F.abs(fb) < F.lit(float("inf")))
    return (
        F.when(
            (fa == 0) & (fb < 0),
            _error("zero raised to a negative power is undefined", "2201F", T.DoubleType()),
        )
        .when(
            (fa < 0) & finite & (fb != F.floor(fb).cast("double")),
            _error(
                "a negative number raised to a non-integer power yields a complex result",
                "2201F",
                T.DoubleType(),
            ),
        )
        .when(
            finite & (F.abs(result) == F.lit(float("inf"))),
            _error("value out of range: overflow", "22003", T.DoubleType()),
        )
        .when(
            finite & (result == 0) & (fa != 0),
            _error("value out of range: underflow", "22003", T.DoubleType()),
        )
        .otherwise(result)
        .cast(out)
    )


_SPARK_TRUNC = {
    "microseconds": "MICROSECOND",
    "milliseconds": "MILLISECOND",
    "second": "SECOND",
    "minute": "MINUTE",
    "hour": "HOUR",
    "day": "DAY",
    "week": "WEEK",
    "month": "MONTH",
    "quarter": "QUARTER",
    "year": "YEAR",
}


_EPOCH_2000_MICROS = 946_684_800_000_000


def _timestamp_round(expr: CallFunction, value: SparkColumn, out: T.DataType) -> SparkColumn:
    """timestamp(p): as local_builtins.timestamp_round, on microseconds since 2000."""
    precision = expr.args[1]
    if not isinstance(precision, Literal):
        raise TypeError("timestamp_round needs a constant precision on Spark")
    if int(precision.value) >= 6:
        return value
    scale = 10 ** (6 - int(precision.value))
    micros = F.unix_micros(value.cast(T.TimestampType())) - F.lit(_EPOCH_2000_MICROS)
    magnitude = F.floor((F.abs(micros) + F.lit(scale // 2)) / F.lit(scale)) * F.lit(scale)
    rounded = F.when(micros >= 0, magnitude).otherwise(-magnitude) + F.lit(_EPOCH_2000_MICROS)
    return F.timestamp_micros(rounded.cast("long")).cast(out)


def _constant_unit(expr: CallFunction) -> str:
    unit = expr.args[0]
    if not isinstance(unit, Literal) or not isinstance(unit.value, str):
        raise TypeError(f"{expr.name} needs a constant unit on Spark")
    return normalize_unit(unit.value)


def _date_trunc(expr: CallFunction, value: SparkColumn, st: ScalarType) -> SparkColumn:
    unit = _constant_unit(expr)
    out = spark_type(st)
    if unit not in _SPARK_TRUNC:
        return _error(f'unit "{unit}" not recognized for type timestamp', "22023", out)
    return F.date_trunc(_SPARK_TRUNC[unit], value.cast(T.TimestampType())).cast(out)


def _field(unit: str, value: SparkColumn) -> SparkColumn:
    """The field as decimal(38, 10) (the session time zone is UTC)."""
    ts = value.cast(T.TimestampType())
    dec = T.DecimalType(38, 10)
    seconds = F.call_function("date_part", F.lit("SECOND"), ts).cast(dec)
    year = F.year(ts)
    fields = {
        "microseconds": lambda: seconds * 1_000_000,
        "milliseconds": lambda: seconds * 1000,
        "second": lambda: seconds,
        "minute": lambda: F.minute(ts),
        "hour": lambda: F.hour(ts),
        "day": lambda: F.dayofmonth(ts),
        "week": lambda: F.weekofyear(ts),
        "month": lambda: F.month(ts),
        "quarter": lambda: F.quarter(ts),
        "year": lambda: year,
        "decade": lambda: F.floor(year / 10),
        "century": lambda: F.floor((year + 99) / 100),
        "millennium": lambda: F.floor((year + 999) / 1000),
        "dow": lambda: F.dayofweek(ts) - 1,
        "isodow": lambda: (F.dayofweek(ts) + 5) % 7 + 1,
        "doy": lambda: F.dayofyear(ts),
        "isoyear": lambda: F.call_function("date_part", F.lit("YEAROFWEEK"), ts),
        "epoch": lambda: F.unix_micros(ts).cast(dec) / F.lit(1_000_000).cast(dec),
    }
    if unit not in fields:
        return _error(f'unit "{unit}" not recognized for type timestamp', "22023", dec)
    return fields[unit]().cast(dec)


def _constant_text(expr: CallFunction, i: int) -> str:
    value = expr.args[i]
    if not isinstance(value, Literal) or not isinstance(value.value, str):
        raise TypeError(f"{expr.name} needs a constant argument {i} on Spark")
    return value.value


def _at_time_zone(name: str, value: SparkColumn, zone: str) -> SparkColumn:
    """AT TIME ZONE with a constant zone (the binder checked its name; the
    session time zone is UTC, so timestamp <-> timestamp_ntz casts keep the
    wall-clock fields)."""
    if name == "timezone_to_local":
        return F.from_utc_timestamp(value, zone).cast(T.TimestampNTZType())
    wall = value.cast(T.TimestampType())
    first = F.to_utc_timestamp(wall, zone)  # Java: a repeated time takes the earlier offset
    # PostgreSQL takes the later one: the offset 3 hours on, if it gives `wall` too.
    probe = first + F.expr("INTERVAL 3 HOURS")
    offset = F.unix_micros(F.from_utc_timestamp(probe, zone)) - F.unix_micros(probe)
    later = F.timestamp_micros(F.unix_micros(wall) - offset)
    repeated = (later > first) & (F.from_utc_timestamp(later, zone) == wall)
    return F.when(repeated, later).otherwise(first)


def render_function(
    expr: CallFunction, args: list[SparkColumn], types: list[ColumnType]
) -> SparkColumn:
    """`expr` over its rendered `args` (whose types are `types`): NULL when
    an argument is (Spark's greatest/least inside some rules skip NULLs)."""
    result = _render(expr, args, types)
    if expr.name in NULL_TOLERANT:
        return result
    nullable = [a for a, t in zip(args, types, strict=True) if t.nullable]
    if not nullable:
        return result
    any_null = nullable[0].isNull()
    for arg in nullable[1:]:
        any_null = any_null | arg.isNull()
    out = spark_type(expr.type.scalar_type)
    return F.when(any_null, F.lit(None).cast(out)).otherwise(result)


def _python_udf(name: str, out: T.DataType) -> Any:
    """The in-process implementation as a Spark UDF (jsonb operators)."""
    from coordinator_lib.compute.local_functions import call_function

    def call(*args: Any) -> Any:
        try:
            return call_function(name, list(args))
        except ValueError as error:
            code = getattr(error, "code", "22000")
            raise ValueError(f"{error} (SQLSTATE {code})") from None

    return F.udf(call, out)


def _render(expr: CallFunction, args: list[SparkColumn], types: list[ColumnType]) -> SparkColumn:
    name = expr.name
    if name in JSONB_FUNCTIONS or name in PYTHON_BUILTINS:
        return _python_udf(name, spark_type(expr.type.scalar_type))(*args)
    out = spark_type(expr.type.scalar_type)
    if name == "substring":
        return _substring(args)
    if name in ("btrim", "ltrim", "rtrim"):
        return _trim(name, args)
    if name == "replace":
        return F.replace(args[0], args[1], args[2])
    if name == "concat":
        return F.concat_ws("", *args)
    if name == "concat_ws":
        return F.call_function("concat_ws", *args)
    if name == "strpos":
        return F.call_function("instr", args[0], args[1])
    if name == "left":
        return _left(args[0], args[1])
    if name == "right":
        return _right(args[0], args[1])
    if name in ("lpad", "rpad"):
        return _pad(name, args)
    if name == "split_part":
        return _split_part(args)
    if name == "starts_with":
        return F.startswith(args[0], args[1])
    if name == "reverse":
        return F.reverse(args[0])
    if name == "repeat":
        return F.call_function("repeat", args[0], F.greatest(args[1], F.lit(0)))
    if name == "md5":
        return F.md5(args[0])
    if name == "octet_length":
        return F.octet_length(args[0]).cast("int")
    if name in ("round", "ceil", "floor"):
        return _integral(name, args[0], types[0].scalar_type, out)
    if name == "round_to":
        places = expr.args[1]
        if not isinstance(places, Literal):
            raise TypeError("round(numeric, places) needs constant places on Spark")
        return F.round(args[0], int(places.value)).cast(out)
    if name == "sqrt":
        return _sqrt(args[0], out)
    if name == "power":
        return _power(args[0], args[1], out)
    if name == "date_trunc":
        return _date_trunc(expr, args[1], expr.type.scalar_type)
    if name == "timestamp_round":
        return _timestamp_round(expr, args[0], out)
    if name == "add_interval":
        out_value = args[0]
        for unit, amount in zip(("MONTH", "DAY", "MICROSECOND"), args[1:], strict=True):
            out_value = F.timestamp_add(unit, amount, out_value)
        return out_value.cast(out)
    if name in ("extract", "date_part"):
        return _field(_constant_unit(expr), args[1]).cast(out)
    if name in ("date_add_days", "date_sub_days"):
        days = args[1] if name == "date_add_days" else -args[1]
        moved = F.date_add(args[0], days)
        year = F.year(moved)
        out_of_range = _error("date out of range", "22008", out)  # Python's dates end at 9999
        return F.when((year < 1) | (year > 9999), out_of_range).otherwise(moved)
    if name == "date_diff_days":
        return F.datediff(args[0], args[1]).cast(out)
    if name in ("timezone_to_local", "timezone_from_local"):
        return _at_time_zone(name, args[0], _constant_text(expr, 1))
    raise TypeError(f"cannot render function {name} on Spark")


__all__ = ["render_function"]
