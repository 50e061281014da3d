"""Date and time functions with PostgreSQL's semantics: date_trunc,
extract, date_part, timestamp +/- interval, date +/- integer, date - date,
make_date, make_timestamp, AT TIME ZONE (zoneinfo), and the cast to
timestamp(p). to_char is in `to_char.py`.

The unit or field of date_trunc/extract/date_part is the first argument, a
text constant (the binder checks it against the lists below). Spark renders
these natively (the session time zone is UTC); make_date and
make_timestamp run there as UDFs of the Python implementation.
"""

from __future__ import annotations

import calendar
import datetime as dt
import decimal
import functools
import math
import zoneinfo
from collections.abc import Callable
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import functions as F
from pyspark.sql import types as T

from coordinator_lib.expr.functions.math import numeric_result
from coordinator_lib.expr.functions.registry import FunctionError, SparkCall, scalar_function, sig
from coordinator_lib.expr.functions.spark import spark_error
from coordinator_lib.repr.relation import ScalarType

S = ScalarType

_EPOCH = dt.datetime(1970, 1, 1)
DATE_TRUNC_UNITS = (
    "microseconds",
    "milliseconds",
    "second",
    "minute",
    "hour",
    "day",
    "week",
    "month",
    "quarter",
    "year",
)
EXTRACT_FIELDS = (
    "microseconds",
    "milliseconds",
    "second",
    "minute",
    "hour",
    "day",
    "week",
    "month",
    "quarter",
    "year",
    "decade",
    "century",
    "millennium",
    "dow",
    "isodow",
    "doy",
    "isoyear",
    "epoch",
)
TIME_FIELDS = ("microseconds", "milliseconds", "second", "minute", "hour")
UNIT_ALIASES = {
    "microsecond": "microseconds",
    "us": "microseconds",
    "millisecond": "milliseconds",
    "ms": "milliseconds",
    "seconds": "second",
    "sec": "second",
    "secs": "second",
    "s": "second",
    "minutes": "minute",
    "min": "minute",
    "mins": "minute",
    "m": "minute",
    "hours": "hour",
    "h": "hour",
    "days": "day",
    "d": "day",
    "weeks": "week",
    "w": "week",
    "months": "month",
    "mon": "month",
    "mons": "month",
    "quarters": "quarter",
    "years": "year",
    "y": "year",
    "yr": "year",
    "yrs": "year",
}


def normalize_unit(unit: str) -> str:
    key = unit.strip().lower()
    return UNIT_ALIASES.get(key, key)


def _naive(value: dt.datetime) -> tuple[dt.datetime, dt.tzinfo | None]:
    if value.tzinfo is None:
        return value, None
    return value.astimezone(dt.UTC).replace(tzinfo=None), dt.UTC


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


def _constant_unit(c: SparkCall) -> str:
    return normalize_unit(str(c.constant(0)))


def _date_trunc_column(c: SparkCall) -> SparkColumn:
    unit = _constant_unit(c)
    if unit not in _SPARK_TRUNC:
        return spark_error(f'unit "{unit}" not recognized for type timestamp', "22023", c.out)
    return F.date_trunc(_SPARK_TRUNC[unit], c.args[1].cast(T.TimestampType())).cast(c.out)


@scalar_function(
    "date_trunc",
    sig(S.TEXT, S.TIMESTAMP, result=S.TIMESTAMP),
    sig(S.TEXT, S.TIMESTAMPTZ, result=S.TIMESTAMPTZ),
    spark=_date_trunc_column,
)
def date_trunc(unit: str, value: dt.datetime) -> dt.datetime:
    naive, tz = _naive(value)
    unit = normalize_unit(unit)
    if unit == "microseconds":
        out = naive
    elif unit == "milliseconds":
        out = naive.replace(microsecond=naive.microsecond // 1000 * 1000)
    elif unit == "second":
        out = naive.replace(microsecond=0)
    elif unit == "minute":
        out = naive.replace(second=0, microsecond=0)
    elif unit == "hour":
        out = naive.replace(minute=0, second=0, microsecond=0)
    elif unit == "day":
        out = dt.datetime(naive.year, naive.month, naive.day)
    elif unit == "week":
        day = naive.date() - dt.timedelta(days=naive.weekday())
        out = dt.datetime(day.year, day.month, day.day)
    elif unit == "month":
        out = dt.datetime(naive.year, naive.month, 1)
    elif unit == "quarter":
        out = dt.datetime(naive.year, (naive.month - 1) // 3 * 3 + 1, 1)
    elif unit == "year":
        out = dt.datetime(naive.year, 1, 1)
    else:
        raise FunctionError(f'unit "{unit}" not recognized for type timestamp', "22023")
    return out.replace(tzinfo=tz) if tz is not None else out


_EPOCH_2000 = dt.datetime(2000, 1, 1)
_EPOCH_2000_MICROS = 946_684_800_000_000


def _timestamp_round_column(c: SparkCall) -> SparkColumn:
    """As `timestamp_round`, on microseconds since 2000."""
    precision = int(c.constant(1))
    if precision >= 6:
        return c.args[0]
    scale = 10 ** (6 - precision)
    micros = F.unix_micros(c.args[0].cast(T.TimestampType())) - F.lit(_EPOCH_2000_MICROS)
    magnitude = F.floor((F.abs(micros) + F.lit(scale // 2)) / F.lit(scale)) * F.lit(scale)
    rounded = F.when(micros >= 0, magnitude).otherwise(-magnitude) + F.lit(_EPOCH_2000_MICROS)
    return F.timestamp_micros(rounded.cast("long")).cast(c.out)


@scalar_function(
    "timestamp_round",
    sig(S.TIMESTAMP, S.INTEGER, result=S.TIMESTAMP),
    sig(S.TIMESTAMPTZ, S.INTEGER, result=S.TIMESTAMPTZ),
    sql=(),
    spark=_timestamp_round_column,
)
def timestamp_round(value: dt.datetime, precision: int) -> dt.datetime:
    """A cast to timestamp(p): the fraction rounded to `p` digits, half away
    from PostgreSQL's epoch 2000-01-01 as PostgreSQL's AdjustTimestampForTypmod."""
    if precision >= 6:
        return value
    naive, tz = _naive(value)
    micros = (naive - _EPOCH_2000) // dt.timedelta(microseconds=1)
    scale = 10 ** (6 - precision)
    magnitude = (abs(micros) + scale // 2) // scale * scale
    out = _EPOCH_2000 + dt.timedelta(microseconds=magnitude if micros >= 0 else -magnitude)
    return out.replace(tzinfo=tz) if tz is not None else out


def _field(field: str, value: dt.date) -> decimal.Decimal:
    if isinstance(value, dt.datetime):
        naive, _ = _naive(value)
    else:
        naive = dt.datetime(value.year, value.month, value.day)
    seconds = decimal.Decimal(naive.second) + decimal.Decimal(naive.microsecond).scaleb(-6)
    year = naive.year
    field = normalize_unit(field)
    values: dict[str, Callable[[], Any]] = {
        "microseconds": lambda: naive.second * 1_000_000 + naive.microsecond,
        "milliseconds": lambda: seconds * 1000,
        "second": lambda: seconds,
        "minute": lambda: naive.minute,
        "hour": lambda: naive.hour,
        "day": lambda: naive.day,
        "week": lambda: naive.isocalendar()[1],
        "month": lambda: naive.month,
        "quarter": lambda: (naive.month - 1) // 3 + 1,
        "year": lambda: year,
        "decade": lambda: year // 10,
        "century": lambda: (year + 99) // 100,
        "millennium": lambda: (year + 999) // 1000,
        "dow": lambda: (naive.weekday() + 1) % 7,
        "isodow": lambda: naive.weekday() + 1,
        "doy": lambda: naive.timetuple().tm_yday,
        "isoyear": lambda: naive.isocalendar()[0],
        "epoch": lambda: decimal.Decimal((naive - _EPOCH) // dt.timedelta(microseconds=1)).scaleb(
            -6
        ),
    }
    if field not in values:
        raise FunctionError(f'unit "{field}" not recognized for type timestamp', "22023")
    return decimal.Decimal(values[field]())


def _field_column(unit: str, value: SparkColumn) -> SparkColumn:
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
        return spark_error(f'unit "{unit}" not recognized for type timestamp', "22023", dec)
    return fields[unit]().cast(dec)


def _field_spark(c: SparkCall) -> SparkColumn:
    return _field_column(_constant_unit(c), c.args[1]).cast(c.out)


@scalar_function(
    "extract",
    sig(S.TEXT, S.DATE, result=S.NUMERIC),
    sig(S.TEXT, S.TIMESTAMP, result=S.NUMERIC),
    sig(S.TEXT, S.TIMESTAMPTZ, result=S.NUMERIC),
    spark=_field_spark,
)
def extract(field: str, value: dt.date) -> decimal.Decimal:
    return numeric_result(_field(field, value))


@scalar_function(
    "date_part",
    sig(S.TEXT, S.TIMESTAMP, result=S.DOUBLE),
    sig(S.TEXT, S.TIMESTAMPTZ, result=S.DOUBLE),
    spark=_field_spark,
)
def date_part(field: str, value: dt.date) -> float:
    return float(_field(field, value))


def add_interval(value: dt.datetime, months: int, days: int, micros: int) -> dt.datetime:
    """PostgreSQL's timestamp + interval: months first (the day clamped to the
    month's last), then days, then the time part (time zone UTC)."""
    try:
        year, month = divmod(value.month - 1 + months, 12)
        year += value.year
        last = calendar.monthrange(year, month + 1)[1]
        moved = value.replace(year=year, month=month + 1, day=min(value.day, last))
        return moved + dt.timedelta(days=days, microseconds=micros)
    except (OverflowError, ValueError):
        raise FunctionError("timestamp out of range", "22008") from None


def _date_add_column(sign: int) -> Callable[[SparkCall], SparkColumn]:
    def build(c: SparkCall) -> SparkColumn:
        moved = F.date_add(c.args[0], c.args[1] if sign > 0 else -c.args[1])
        year = F.year(moved)
        out_of_range = spark_error("date out of range", "22008", c.out)  # Python's end at 9999
        return F.when((year < 1) | (year > 9999), out_of_range).otherwise(moved)

    return build


@scalar_function(
    "date_add_days",
    sig(S.DATE, S.INTEGER, result=S.DATE),
    sql=(),
    spark=_date_add_column(1),
)
def date_add_days(value: dt.date, days: int) -> dt.date:
    try:
        return value + dt.timedelta(days=days)
    except OverflowError:
        raise FunctionError("date out of range", "22008") from None


@scalar_function(
    "date_sub_days",
    sig(S.DATE, S.INTEGER, result=S.DATE),
    sql=(),
    spark=_date_add_column(-1),
)
def date_sub_days(value: dt.date, days: int) -> dt.date:
    return date_add_days(value, -days)


@scalar_function(
    "date_diff_days",
    sig(S.DATE, S.DATE, result=S.INTEGER),
    sql=(),
    spark=lambda c: F.datediff(c.args[0], c.args[1]).cast(c.out),
)
def date_diff_days(a: dt.date, b: dt.date) -> int:
    return (a - b).days


@scalar_function("make_date", sig(S.INTEGER, S.INTEGER, S.INTEGER, result=S.DATE))
def make_date(year: int, month: int, day: int) -> dt.date:
    """Years before 1 (BC in PostgreSQL) and after 9999 are out of range here."""
    try:
        return dt.date(year, month, day)
    except ValueError:
        if year <= 0 or year > 9999:
            raise FunctionError(
                f"date out of range: {year}-{month:02d}-{day:02d}", "22008"
            ) from None
        raise FunctionError(
            f"date field value out of range: {year}-{month:02d}-{day:02d}", "22008"
        ) from None


@scalar_function(
    "make_timestamp",
    sig(S.INTEGER, S.INTEGER, S.INTEGER, S.INTEGER, S.INTEGER, S.DOUBLE, result=S.TIMESTAMP),
)
def make_timestamp(
    year: int, month: int, day: int, hour: int, minute: int, seconds: float
) -> dt.datetime:
    """PostgreSQL's: the seconds rounded to microseconds, 24:00:00 and a
    60th second allowed (they carry into the next day or minute)."""
    date = make_date(year, month, day)
    if (
        hour < 0
        or minute < 0
        or minute > 59
        or not 0 <= seconds <= 60
        or hour > 24
        or (hour == 24 and (minute > 0 or seconds > 0))
    ):
        raise FunctionError(
            f"time field value out of range: {hour}:{minute:02d}:{seconds:02g}", "22008"
        )
    micros = round(seconds * 1_000_000)
    try:
        return dt.datetime(date.year, date.month, date.day) + dt.timedelta(
            hours=hour, minutes=minute, microseconds=micros
        )
    except OverflowError:
        raise FunctionError("timestamp out of range", "22008") from None


@functools.lru_cache(maxsize=64)
def _zone(name: str) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        pass
    folded = {z.lower(): z for z in zoneinfo.available_timezones()}.get(name.lower())
    if folded is None:
        raise FunctionError(f'time zone "{name}" not recognized', "22023")
    return zoneinfo.ZoneInfo(folded)


def zone_name(name: str) -> str:
    """The IANA name of a time zone PostgreSQL would take (case-insensitive),
    or FunctionError 22023."""
    return _zone(name).key


def _at_time_zone_column(name: str, value: SparkColumn, zone: str) -> SparkColumn:
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


@scalar_function(
    "timezone_to_local",
    sig(S.TIMESTAMPTZ, S.TEXT, result=S.TIMESTAMP),
    sql=(),
    spark=lambda c: _at_time_zone_column("timezone_to_local", c.args[0], str(c.constant(1))),
)
def timezone_to_local(value: dt.datetime, zone: str) -> dt.datetime:
    """`timestamptz AT TIME ZONE zone`: the wall-clock time there."""
    try:
        return value.astimezone(_zone(zone)).replace(tzinfo=None)
    except OverflowError:
        raise FunctionError("timestamp out of range", "22008") from None


@scalar_function(
    "timezone_from_local",
    sig(S.TIMESTAMP, S.TEXT, result=S.TIMESTAMPTZ),
    sql=(),
    spark=lambda c: _at_time_zone_column("timezone_from_local", c.args[0], str(c.constant(1))),
)
def timezone_from_local(value: dt.datetime, zone: str) -> dt.datetime:
    """`timestamp AT TIME ZONE zone`: the instant whose wall-clock time there
    is `value`. A time skipped by a DST change takes the offset before it;
    a repeated one the later (standard-time) offset, as PostgreSQL does."""
    tz = _zone(zone)
    first = value.replace(tzinfo=tz, fold=0)
    second = value.replace(tzinfo=tz, fold=1)
    chosen = second if first.utcoffset() != second.utcoffset() and _is_real(first) else first
    try:
        return chosen.astimezone(dt.UTC)
    except OverflowError:
        raise FunctionError("timestamp out of range", "22008") from None


def _is_real(local: dt.datetime) -> bool:
    """Whether `local` exists on the zone's clock (is not in a DST gap)."""
    back = local.astimezone(dt.UTC).astimezone(local.tzinfo)
    return back.replace(tzinfo=None) == local.replace(tzinfo=None)


# The seconds of 0001-01-01 and 10000-01-01 (UTC): the timestamps Tidemark holds.
_TO_TIMESTAMP_RANGE = (-62135596800.0, 253402300800.0)


def _to_timestamp_column(seconds: SparkColumn) -> SparkColumn:
    nan = spark_error("timestamp cannot be NaN", "22008", T.TimestampType())
    low, high = _TO_TIMESTAMP_RANGE
    out = spark_error("timestamp out of range", "22008", T.TimestampType())
    return (
        F.when(F.isnan(seconds), nan)
        .when((seconds < low) | (seconds >= high), out)
        .otherwise(F.timestamp_micros(F.round(seconds * 1_000_000).cast("long")))
    )


@scalar_function(
    "to_timestamp",
    sig(S.DOUBLE, result=S.TIMESTAMPTZ),
    spark=lambda c: _to_timestamp_column(c.args[0]),
)
def to_timestamp(seconds: float) -> dt.datetime:
    """Seconds since 1970-01-01 UTC as a timestamptz, to the microsecond
    (PostgreSQL's and Materialize's to_timestamp(double precision))."""
    if math.isnan(seconds):
        raise FunctionError("timestamp cannot be NaN", "22008")
    low, high = _TO_TIMESTAMP_RANGE
    if not low <= seconds < high:
        raise FunctionError(f'timestamp out of range: "{seconds:g}"', "22008")
    try:
        micros = round(seconds * 1_000_000)
        return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=micros)
    except (OverflowError, ValueError):
        raise FunctionError(f'timestamp out of range: "{seconds:g}"', "22008") from None
