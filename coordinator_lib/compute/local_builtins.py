"""Python implementations of the built-in functions of `expr/functions.py`
(string, math, date/time), with PostgreSQL's semantics. Spark's are in
`compute/spark_functions.py`; `tests/compute/test_functions_postgres.py`
holds both to a real PostgreSQL.

Arguments arrive already converted to the overload's types by the binder
(`sql/builtins.py`): a float argument is a Python float, numeric a Decimal,
so `round(x)` knows its overload from the value. Errors are ValueError with
a SQLSTATE (`FunctionError`); `local_scalar.eval_scalar` reports them.
"""

from __future__ import annotations

import calendar
import datetime as dt
import decimal
import hashlib
import math
from collections.abc import Callable
from typing import Any

from coordinator_lib.repr.numeric import NumericFieldOverflow, to_numeric

NUMERIC_SCALE = decimal.Decimal(1).scaleb(-10)
_CONTEXT = decimal.Context(prec=60, rounding=decimal.ROUND_HALF_UP)


class FunctionError(ValueError):
    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def _numeric(value: decimal.Decimal) -> decimal.Decimal:
    """`value` in numeric's bound (repr/numeric.py), overflow as 22003."""
    try:
        return to_numeric(value)
    except NumericFieldOverflow as error:
        raise FunctionError(error.message, error.code) from None


def _from_float(value: float) -> decimal.Decimal:
    if not math.isfinite(value):
        raise FunctionError("cannot convert infinity or NaN to numeric", "22003")
    return _numeric(decimal.Decimal(repr(value)))


# --- text -------------------------------------------------------------------------


def substring(text: str, start: int, length: int | None = None) -> str:
    """PostgreSQL counts from 1; characters before position 1 count toward
    the length (substring('hello', 0, 3) is 'he')."""
    begin = max(start, 1)
    if length is None:
        return text[begin - 1 :]
    if length < 0:
        raise FunctionError("negative substring length not allowed", "22011")
    end = start + length
    return text[begin - 1 : max(end - 1, begin - 1)]


def btrim(text: str, chars: str = " ") -> str:
    return text.strip(chars) if chars else text


def ltrim(text: str, chars: str = " ") -> str:
    return text.lstrip(chars) if chars else text


def rtrim(text: str, chars: str = " ") -> str:
    return text.rstrip(chars) if chars else text


def replace(text: str, old: str, new: str) -> str:
    return text.replace(old, new) if old else text


def concat(*parts: str | None) -> str:
    return "".join(p for p in parts if p is not None)


def concat_ws(separator: str | None, *parts: str | None) -> str | None:
    if separator is None:
        return None
    return separator.join(p for p in parts if p is not None)


def strpos(text: str, sub: str) -> int:
    return text.find(sub) + 1


def left(text: str, n: int) -> str:
    return text[:n] if n >= 0 else text[: max(len(text) + n, 0)]


def right(text: str, n: int) -> str:
    if n >= 0:
        return text[len(text) - n :] if n < len(text) else text
    return text[-n:]


def _pad(text: str, n: int, fill: str, at_left: bool) -> str:
    if n <= 0:
        return ""
    if len(text) >= n or not fill:
        return text[:n]
    missing = n - len(text)
    pad = (fill * (missing // len(fill) + 1))[:missing]
    return pad + text if at_left else text + pad


def lpad(text: str, n: int, fill: str = " ") -> str:
    return _pad(text, n, fill, True)


def rpad(text: str, n: int, fill: str = " ") -> str:
    return _pad(text, n, fill, False)


def split_part(text: str, delimiter: str, n: int) -> str:
    if n == 0:
        raise FunctionError("field position must not be zero", "22023")
    parts = text.split(delimiter) if delimiter else [text]
    index = n - 1 if n > 0 else len(parts) + n
    return parts[index] if 0 <= index < len(parts) else ""


def starts_with(text: str, prefix: str) -> bool:
    return text.startswith(prefix)


def reverse(text: str) -> str:
    return text[::-1]


def repeat(text: str, n: int) -> str:
    return text * max(n, 0)


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def octet_length(text: str) -> int:
    return len(text.encode())


# --- math -------------------------------------------------------------------------


def round_(x: float | decimal.Decimal) -> float | decimal.Decimal:
    """round(double) rounds half to even (rint); round(numeric) half away from zero."""
    if isinstance(x, decimal.Decimal):
        return _numeric(x.quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP))
    if not math.isfinite(x):
        return x
    return float(round(x))


def round_to(x: decimal.Decimal, places: int) -> decimal.Decimal:
    exponent = decimal.Decimal(1).scaleb(-places)
    return _numeric(x.quantize(exponent, rounding=decimal.ROUND_HALF_UP, context=_CONTEXT))


def _integral(x: float | decimal.Decimal, rounding: str) -> float | decimal.Decimal:
    if isinstance(x, decimal.Decimal):
        return _numeric(x.quantize(decimal.Decimal(1), rounding=rounding))
    if not math.isfinite(x):
        return x
    return float(math.ceil(x) if rounding == decimal.ROUND_CEILING else math.floor(x))


def ceil(x: float | decimal.Decimal) -> float | decimal.Decimal:
    return _integral(x, decimal.ROUND_CEILING)


def floor(x: float | decimal.Decimal) -> float | decimal.Decimal:
    return _integral(x, decimal.ROUND_FLOOR)


def sqrt(x: float | decimal.Decimal) -> float | decimal.Decimal:
    """numeric's square root is computed in double precision (both engines)."""
    if x < 0:
        raise FunctionError("cannot take square root of a negative number", "2201F")
    if isinstance(x, decimal.Decimal):
        return _from_float(math.sqrt(float(x)))
    return math.sqrt(x)


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


# --- date/time --------------------------------------------------------------------

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


def extract(field: str, value: dt.date) -> decimal.Decimal:
    return _numeric(_field(field, value))


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


BUILTINS: dict[str, Callable[..., Any]] = {
    "substring": substring,
    "btrim": btrim,
    "ltrim": ltrim,
    "rtrim": rtrim,
    "replace": replace,
    "concat": concat,
    "concat_ws": concat_ws,
    "strpos": strpos,
    "left": left,
    "right": right,
    "lpad": lpad,
    "rpad": rpad,
    "split_part": split_part,
    "starts_with": starts_with,
    "reverse": reverse,
    "repeat": repeat,
    "md5": md5,
    "octet_length": octet_length,
    "round": round_,
    "round_to": round_to,
    "ceil": ceil,
    "floor": floor,
    "sqrt": sqrt,
    "power": power,
    "date_trunc": date_trunc,
    "timestamp_round": timestamp_round,
    "extract": extract,
    "date_part": date_part,
    "add_interval": add_interval,
}

__all__ = [
    "BUILTINS",
    "DATE_TRUNC_UNITS",
    "EXTRACT_FIELDS",
    "TIME_FIELDS",
    "FunctionError",
    "normalize_unit",
]
