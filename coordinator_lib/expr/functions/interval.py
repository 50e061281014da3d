"""Interval and time-of-day functions with PostgreSQL's semantics
(repr/interval.py and repr/time_of_day.py hold the values): timestamp +/-
interval, timestamp - timestamp, interval +/- interval, interval * and / a
number, unary minus, the comparison key, extract / date_part of an
interval or a time, the justify_* functions, time +/- interval, time -
time and date + time.

The binder (sql/function_calls.py) binds the operators to these by name.
Spark renders the comparison key and timestamp + interval natively (the
struct's fields); the others run there as UDFs of the Python
implementation (compute/scalar.py converts the struct to an Interval).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Callable

from pyspark.sql import Column as SparkColumn
from pyspark.sql import functions as F

from coordinator_lib.expr.functions.datetime import add_interval, normalize_unit
from coordinator_lib.expr.functions.math import numeric_result
from coordinator_lib.expr.functions.registry import FunctionError, SparkCall, scalar_function, sig
from coordinator_lib.repr.interval import (
    DAY_MICROS,
    FIELDS,
    MONTH_DAYS,
    Interval,
    IntervalOutOfRange,
    restrict,
    trunc_div,
)
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.repr.time_of_day import time_from_micros, time_micros

S = ScalarType
_HOUR = 3_600_000_000
_MINUTE = 60_000_000
# The fields extract() reads from an interval (PostgreSQL 14+; dow, doy,
# week... are 0A000 there too).
INTERVAL_FIELDS = (
    "microseconds",
    "milliseconds",
    "second",
    "minute",
    "hour",
    "day",
    "month",
    "quarter",
    "year",
    "decade",
    "century",
    "millennium",
    "epoch",
)


def _interval(
    months: decimal.Decimal | float, days: decimal.Decimal | float, micros: decimal.Decimal | float
) -> Interval:
    try:
        return Interval(int(months), int(days), int(micros))
    except IntervalOutOfRange:
        raise FunctionError("interval out of range", "22008") from None


def _add_interval_column(c: SparkCall) -> SparkColumn:
    moved, interval = c.args[0], c.args[1]
    for unit, field in (("MONTH", "months"), ("DAY", "days"), ("MICROSECOND", "micros")):
        moved = F.timestamp_add(unit, interval.getField(field), moved)
    return moved.cast(c.out)


@scalar_function(
    "add_interval",
    sig(S.TIMESTAMP, S.INTERVAL, result=S.TIMESTAMP),
    sig(S.TIMESTAMPTZ, S.INTERVAL, result=S.TIMESTAMPTZ),
    sql=(),
    spark=_add_interval_column,
)
def timestamp_add_interval(value: dt.datetime, interval: Interval) -> dt.datetime:
    """timestamp + interval: months first (the day clamped to the month's
    last), then days, then the time part."""
    return add_interval(value, interval.months, interval.days, interval.micros)


@scalar_function(
    "timestamp_diff",
    sig(S.TIMESTAMP, S.TIMESTAMP, result=S.INTERVAL),
    sig(S.TIMESTAMPTZ, S.TIMESTAMPTZ, result=S.INTERVAL),
    sql=(),
)
def timestamp_diff(a: dt.datetime, b: dt.datetime) -> Interval:
    """timestamp - timestamp: whole days and the rest (PostgreSQL's
    timestamp_mi, justified to 24-hour days, never to months)."""
    micros = (a - b) // dt.timedelta(microseconds=1)
    days = trunc_div(micros, DAY_MICROS)
    return _interval(0, days, micros - days * DAY_MICROS)


@scalar_function("interval_add", sig(S.INTERVAL, S.INTERVAL, result=S.INTERVAL), sql=())
def interval_add(a: Interval, b: Interval) -> Interval:
    return _interval(a.months + b.months, a.days + b.days, a.micros + b.micros)


@scalar_function("interval_sub", sig(S.INTERVAL, S.INTERVAL, result=S.INTERVAL), sql=())
def interval_sub(a: Interval, b: Interval) -> Interval:
    return _interval(a.months - b.months, a.days - b.days, a.micros - b.micros)


@scalar_function("interval_neg", sig(S.INTERVAL, result=S.INTERVAL), sql=())
def interval_neg(a: Interval) -> Interval:
    return _interval(-a.months, -a.days, -a.micros)


def _tsround(value: float) -> float:
    """PostgreSQL's TSROUND: to microsecond precision, so fractions that
    should be whole numbers are."""
    return round(value * 1e6) / 1e6


def _scaled(a: Interval, factor: float, op: Callable[[float, float], float]) -> Interval:
    """PostgreSQL's interval_mul / interval_div: each field scaled, the
    fractions of months cascaded down to days (30 a month) and of days to
    seconds, never up."""
    if math.isnan(factor):
        raise FunctionError("interval out of range", "22008")
    months_f, days_f = op(a.months, factor), op(a.days, factor)
    if not (math.isfinite(months_f) and math.isfinite(days_f)):
        raise FunctionError("interval out of range", "22008")
    months, days = int(months_f), int(days_f)
    month_remainder_days = _tsround((months_f - months) * MONTH_DAYS)
    sec_remainder = _tsround(
        (days_f - days + month_remainder_days - int(month_remainder_days)) * 86400
    )
    if abs(sec_remainder) >= 86400:
        days += int(sec_remainder / 86400)
        sec_remainder -= int(sec_remainder / 86400) * 86400
    days += int(month_remainder_days)
    micros = op(a.micros, factor) + sec_remainder * 1_000_000
    if not math.isfinite(micros):
        raise FunctionError("interval out of range", "22008")
    return _interval(months, days, round(micros))


@scalar_function("interval_mul", sig(S.INTERVAL, S.DOUBLE, result=S.INTERVAL), sql=())
def interval_mul(a: Interval, factor: float) -> Interval:
    return _scaled(a, factor, lambda x, y: x * y)


@scalar_function("interval_div", sig(S.INTERVAL, S.DOUBLE, result=S.INTERVAL), sql=())
def interval_div(a: Interval, factor: float) -> Interval:
    if factor == 0:
        raise FunctionError("division by zero", "22012")
    return _scaled(a, factor, lambda x, y: x / y)


def spark_order_key(interval: SparkColumn) -> SparkColumn:
    """`interval_cmp_key` of a Spark interval struct (decimal(38, 0)): what
    min/max and comparisons order intervals by on Spark."""
    whole = "decimal(38,0)"
    days = interval.getField("months").cast(whole) * MONTH_DAYS + interval.getField("days").cast(
        whole
    )
    return days * F.lit(DAY_MICROS).cast(whole) + interval.getField("micros")


def _cmp_key_column(c: SparkCall) -> SparkColumn:
    return spark_order_key(c.args[0]).cast(c.out)


@scalar_function(
    "interval_cmp_key", sig(S.INTERVAL, result=S.NUMERIC), sql=(), spark=_cmp_key_column
)
def interval_cmp_key(a: Interval) -> decimal.Decimal:
    """What PostgreSQL compares intervals by (=, <, ORDER BY): microseconds
    with 30-day months and 24-hour days."""
    return decimal.Decimal(a.cmp_key())


def _field_column(field: str) -> Callable[[SparkCall], SparkColumn]:
    return lambda c: c.args[0].getField(field).cast(c.out)


@scalar_function(
    "interval_months",
    sig(S.INTERVAL, result=S.BIGINT),
    sql=(),
    spark=_field_column("months"),
)
def interval_months(a: Interval) -> int:
    """sum(interval) adds each field apart, as PostgreSQL's interval_pl."""
    return a.months


@scalar_function(
    "interval_days", sig(S.INTERVAL, result=S.BIGINT), sql=(), spark=_field_column("days")
)
def interval_days(a: Interval) -> int:
    return a.days


@scalar_function(
    "interval_micros", sig(S.INTERVAL, result=S.BIGINT), sql=(), spark=_field_column("micros")
)
def interval_micros(a: Interval) -> int:
    return a.micros


@scalar_function(
    "interval_of_sums",
    sig(S.NUMERIC, S.NUMERIC, S.NUMERIC, result=S.INTERVAL),
    sql=(),
)
def interval_of_sums(
    months: decimal.Decimal, days: decimal.Decimal, micros: decimal.Decimal
) -> Interval:
    """sum(interval) from the sums of its fields: 22008 past an interval's
    range (PostgreSQL's interval_pl raises it as the sum passes the range)."""
    return _interval(months, days, micros)


def _interval_field(field: str, a: Interval) -> decimal.Decimal:
    """A field as PostgreSQL 14's extract(... FROM interval): split with
    truncating division as interval2tm does; epoch counts a year as 365.25
    days and a month as 30."""
    unit = normalize_unit(field)
    hours = trunc_div(a.micros, _HOUR)
    rest = a.micros - hours * _HOUR
    minutes = trunc_div(rest, _MINUTE)
    seconds = rest - minutes * _MINUTE  # microseconds of the seconds field
    years = trunc_div(a.months, 12)
    months = a.months - years * 12
    fields: dict[str, Callable[[], decimal.Decimal | int]] = {
        "microseconds": lambda: seconds,
        "milliseconds": lambda: decimal.Decimal(seconds) / 1000,
        "second": lambda: decimal.Decimal(seconds) / 1_000_000,
        "minute": lambda: minutes,
        "hour": lambda: hours,
        "day": lambda: a.days,
        "month": lambda: months,
        "quarter": lambda: trunc_div(months, 3) + 1,
        "year": lambda: years,
        "decade": lambda: trunc_div(years, 10),
        "century": lambda: trunc_div(years, 100),
        "millennium": lambda: trunc_div(years, 1000),
        "epoch": lambda: (
            decimal.Decimal(years) * 31_557_600
            + decimal.Decimal(months) * 2_592_000
            + decimal.Decimal(a.days) * 86_400
            + decimal.Decimal(a.micros) / 1_000_000
        ),
    }
    if unit not in fields:
        raise FunctionError(f'interval units "{field.lower()}" not supported', "0A000")
    return decimal.Decimal(fields[unit]())


@scalar_function("extract_interval", sig(S.TEXT, S.INTERVAL, result=S.NUMERIC), sql=())
def extract_interval(field: str, a: Interval) -> decimal.Decimal:
    return numeric_result(_interval_field(field, a))


@scalar_function("date_part_interval", sig(S.TEXT, S.INTERVAL, result=S.DOUBLE), sql=())
def date_part_interval(field: str, a: Interval) -> float:
    return float(_interval_field(field, a))


def _distinct(values: tuple[Interval | None, ...]) -> list[Interval]:
    """One value per interval_cmp key (PostgreSQL's `=`): the greatest, the
    one a group of equal intervals prints (sql/interval_keys.py)."""
    kept: dict[decimal.Decimal, Interval] = {}
    for value in values:
        if value is not None:
            key = interval_cmp_key(value)
            kept[key] = max(kept.get(key, value), value)
    return list(kept.values())


@scalar_function("interval_sum_distinct", sig(S.INTERVAL_ARRAY, result=S.INTERVAL), sql=())
def interval_sum_distinct(values: tuple[Interval | None, ...]) -> Interval | None:
    """sum(DISTINCT interval) of the values array_agg collected."""
    kept = _distinct(values)
    if not kept:
        return None
    months, days, micros = (sum(getattr(v, f) for v in kept) for f in FIELDS)
    return interval_of_sums(decimal.Decimal(months), decimal.Decimal(days), decimal.Decimal(micros))


@scalar_function("interval_avg_distinct", sig(S.INTERVAL_ARRAY, result=S.INTERVAL), sql=())
def interval_avg_distinct(values: tuple[Interval | None, ...]) -> Interval | None:
    """avg(DISTINCT interval): their sum / their count, as interval_avg."""
    total = interval_sum_distinct(values)
    return None if total is None else interval_div(total, float(len(_distinct(values))))


@scalar_function("interval_restrict", sig(S.INTERVAL, S.TEXT, S.INTEGER, result=S.INTERVAL), sql=())
def interval_restrict(a: Interval, qualifier: str, precision: int) -> Interval:
    """A cast to `interval <fields>(p)` (PostgreSQL's interval_scale): the
    fields right of the qualifier's last dropped, seconds rounded to p."""
    return restrict(a, qualifier or None, precision)


@scalar_function("justify_days", sig(S.INTERVAL, result=S.INTERVAL))
def justify_days(a: Interval) -> Interval:
    """Whole 30-day periods of the days become months (PostgreSQL's)."""
    months = a.months + trunc_div(a.days, MONTH_DAYS)
    days = a.days - trunc_div(a.days, MONTH_DAYS) * MONTH_DAYS
    if months > 0 and days < 0:
        days, months = days + MONTH_DAYS, months - 1
    elif months < 0 and days > 0:
        days, months = days - MONTH_DAYS, months + 1
    return _interval(months, days, a.micros)


@scalar_function("justify_hours", sig(S.INTERVAL, result=S.INTERVAL))
def justify_hours(a: Interval) -> Interval:
    """Whole 24-hour periods of the time become days (PostgreSQL's)."""
    days = a.days + trunc_div(a.micros, DAY_MICROS)
    micros = a.micros - trunc_div(a.micros, DAY_MICROS) * DAY_MICROS
    if days > 0 and micros < 0:
        micros, days = micros + DAY_MICROS, days - 1
    elif days < 0 and micros > 0:
        micros, days = micros - DAY_MICROS, days + 1
    return _interval(a.months, days, micros)


@scalar_function("justify_interval", sig(S.INTERVAL, result=S.INTERVAL))
def justify_interval(a: Interval) -> Interval:
    """Both, with the signs of all fields made to agree (PostgreSQL's)."""
    months, days = a.months, a.days
    if (days > 0 and a.micros > 0) or (days < 0 and a.micros < 0):
        months += trunc_div(days, MONTH_DAYS)
        days -= trunc_div(days, MONTH_DAYS) * MONTH_DAYS
    days += trunc_div(a.micros, DAY_MICROS)
    micros = a.micros - trunc_div(a.micros, DAY_MICROS) * DAY_MICROS
    months += trunc_div(days, MONTH_DAYS)
    days -= trunc_div(days, MONTH_DAYS) * MONTH_DAYS
    if months > 0 and (days < 0 or (days == 0 and micros < 0)):
        days, months = days + MONTH_DAYS, months - 1
    elif months < 0 and (days > 0 or (days == 0 and micros > 0)):
        days, months = days - MONTH_DAYS, months + 1
    if days > 0 and micros < 0:
        micros, days = micros + DAY_MICROS, days - 1
    elif days < 0 and micros > 0:
        micros, days = micros - DAY_MICROS, days + 1
    return _interval(months, days, micros)


# The fields extract() reads from a time of day (PostgreSQL's; others are 0A000).
TIME_OF_DAY_FIELDS = ("microseconds", "milliseconds", "second", "minute", "hour", "epoch")


@scalar_function("time_add_interval", sig(S.TIME, S.INTERVAL, result=S.TIME), sql=())
def time_add_interval(value: dt.time, interval: Interval) -> dt.time:
    """time + interval: the interval's time part, wrapped around midnight
    (its months and days are ignored, as PostgreSQL ignores them)."""
    return time_from_micros(time_micros(value) + interval.micros)


@scalar_function("time_diff", sig(S.TIME, S.TIME, result=S.INTERVAL), sql=())
def time_diff(a: dt.time, b: dt.time) -> Interval:
    return _interval(0, 0, time_micros(a) - time_micros(b))


@scalar_function("date_add_time", sig(S.DATE, S.TIME, result=S.TIMESTAMP), sql=())
def date_add_time(day: dt.date, value: dt.time) -> dt.datetime:
    return dt.datetime.combine(day, value)


def _time_field(field: str, value: dt.time) -> decimal.Decimal:
    unit = normalize_unit(field)
    seconds = decimal.Decimal(value.second * 1_000_000 + value.microsecond)
    fields: dict[str, Callable[[], decimal.Decimal | int]] = {
        "microseconds": lambda: seconds,
        "milliseconds": lambda: seconds / 1000,
        "second": lambda: seconds / 1_000_000,
        "minute": lambda: value.minute,
        "hour": lambda: value.hour,
        "epoch": lambda: decimal.Decimal(time_micros(value)) / 1_000_000,
    }
    if unit not in fields:
        raise FunctionError(f'unit "{field.lower()}" not supported for type time', "0A000")
    return decimal.Decimal(fields[unit]())


@scalar_function("extract_time", sig(S.TEXT, S.TIME, result=S.NUMERIC), sql=())
def extract_time(field: str, value: dt.time) -> decimal.Decimal:
    return numeric_result(_time_field(field, value))


@scalar_function("date_part_time", sig(S.TEXT, S.TIME, result=S.DOUBLE), sql=())
def date_part_time(field: str, value: dt.time) -> float:
    return float(_time_field(field, value))


__all__ = ["INTERVAL_FIELDS", "TIME_OF_DAY_FIELDS", "spark_order_key"]
