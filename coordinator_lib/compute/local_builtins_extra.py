"""More built-in functions with PostgreSQL's semantics, in Python (the
binder is `sql/builtins_extra.py`):

- math: ln, exp, log (base 10, or log(b, x) of numeric), trunc (also
  trunc(numeric, places)), sign, pi, div (numeric quotient truncated
  toward zero). numeric ln/exp/log are computed in double precision, as
  numeric sqrt and power are.
- date/time: date +/- integer, date - date, make_date, make_timestamp,
  AT TIME ZONE (zoneinfo). Spark renders the arithmetic and AT TIME ZONE
  natively (`compute/spark_functions.py`) and runs the other two as UDFs.
- text: regexp_replace, the regular expression match operators (`~`,
  `~*`; `!~` is NOT of them), initcap, ascii, chr, translate.

Spark runs the others as a Python UDF of these functions
(`compute/spark_functions.py`, as it does jsonb's): PostgreSQL's regular
expressions are neither Java's nor Spark's, and one implementation keeps
the engines identical.

Regular expressions: PostgreSQL's (ARE) patterns are run by Python's `re`
after translating what differs and is common: the POSIX bracket classes
([[:alpha:]] ...) and the word boundaries \\m, \\M, \\y. The replacement
text of regexp_replace takes \\1 .. \\9 and \\& (the whole match), as in
PostgreSQL. Flags: g (every match), i (case-insensitive), c (sensitive),
q (the pattern is literal text); PostgreSQL's others are 0A000.
Character classes, case-insensitive matching and initcap's case mapping
are ASCII, as PostgreSQL's under the C locale (the one the tests' server
runs; Materialize's are Unicode).
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
import re
import zoneinfo
from collections.abc import Callable
from typing import Any

from coordinator_lib.compute.local_builtins import (
    NUMERIC_SCALE,
    FunctionError,
    _from_float,
    _numeric,
)

# --- math -------------------------------------------------------------------------


def _log_checked(x: float | decimal.Decimal) -> None:
    if x == 0:
        raise FunctionError("cannot take logarithm of zero", "2201E")
    if x < 0:
        raise FunctionError("cannot take logarithm of a negative number", "2201E")


def ln(x: float | decimal.Decimal) -> float | decimal.Decimal:
    _log_checked(x)
    if isinstance(x, decimal.Decimal):
        return _from_float(math.log(float(x)))
    return math.log(x) if math.isfinite(x) else x


def log10(x: float | decimal.Decimal) -> float | decimal.Decimal:
    _log_checked(x)
    if isinstance(x, decimal.Decimal):
        return _from_float(math.log10(float(x)))
    return math.log10(x) if math.isfinite(x) else x


def log_base(base: decimal.Decimal, x: decimal.Decimal) -> decimal.Decimal:
    """log(b, x) (numeric only in PostgreSQL)."""
    _log_checked(base)
    _log_checked(x)
    if base == 1:
        raise FunctionError("division by zero", "22012")
    return _from_float(math.log(float(x)) / math.log(float(base)))


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


def trunc(x: float | decimal.Decimal) -> float | decimal.Decimal:
    if isinstance(x, decimal.Decimal):
        return _numeric(x.quantize(decimal.Decimal(1), rounding=decimal.ROUND_DOWN))
    if not math.isfinite(x):
        return x
    return float(math.trunc(x))


def trunc_to(x: decimal.Decimal, places: int) -> decimal.Decimal:
    exponent = decimal.Decimal(1).scaleb(-places)
    context = decimal.Context(prec=60)
    return _numeric(x.quantize(exponent, rounding=decimal.ROUND_DOWN, context=context))


def sign(x: float | decimal.Decimal) -> float | decimal.Decimal:
    if isinstance(x, decimal.Decimal):
        return _numeric(decimal.Decimal((x > 0) - (x < 0)))
    if math.isnan(x):
        return x
    return float((x > 0) - (x < 0))


def pi() -> float:
    return math.pi


def div(a: decimal.Decimal, b: decimal.Decimal) -> decimal.Decimal:
    if b == 0:
        raise FunctionError("division by zero", "22012")
    quotient = (a / b).quantize(decimal.Decimal(1), rounding=decimal.ROUND_DOWN)
    return quotient.quantize(NUMERIC_SCALE)


# --- text -------------------------------------------------------------------------

# POSIX bracket classes, ASCII only (PostgreSQL's follow the database locale).
_CLASSES = {
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "alnum": "a-zA-Z0-9",
    "space": r"\s",
    "upper": "A-Z",
    "lower": "a-z",
    "punct": r"!-/:-@\[-`{-~",
    "xdigit": "0-9A-Fa-f",
}


def _translate_pattern(pattern: str) -> str:
    """PostgreSQL's regular expression as Python's (see module docstring)."""
    out: list[str] = []
    i = 0
    in_bracket = False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append(r"\b" if not in_bracket and nxt in "mMy" else c + nxt)
            i += 2
            continue
        if in_bracket and pattern.startswith("[:", i):
            end = pattern.find(":]", i + 2)
            name = pattern[i + 2 : end] if end > 0 else ""
            if name not in _CLASSES:
                raise FunctionError("invalid regular expression: invalid character class", "2201B")
            out.append(_CLASSES[name])
            i = end + 2
            continue
        if c == "[" and not in_bracket:
            in_bracket = True
            out.append(c)
            i += 1
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
            if pattern.startswith("]", i):  # a ']' first in brackets is literal
                out.append(r"\]")
                i += 1
            continue
        if c == "]" and in_bracket:
            in_bracket = False
        elif c == "[" and in_bracket:
            c = r"\["  # Python warns about nested sets
        out.append(c)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=256)
def _compile(pattern: str, flags: int, quoted: bool = False) -> re.Pattern[str]:
    translated = re.escape(pattern) if quoted else _translate_pattern(pattern)
    try:
        return re.compile(translated, flags)
    except re.error as error:
        raise FunctionError(f"invalid regular expression: {error}", "2201B") from None


def _flags(text: str) -> tuple[int, bool, bool]:
    """(re flags, g, q) of PostgreSQL's flag letters."""
    flags, every, quoted = re.ASCII, False, False
    for f in text:
        if f == "g":
            every = True
        elif f == "i":
            flags |= re.IGNORECASE
        elif f == "c":
            flags &= ~re.IGNORECASE
        elif f == "q":
            quoted = True
        elif f in "bemnpstwx":
            raise FunctionError(f'regular expression option "{f}" is not supported', "0A000")
        else:
            raise FunctionError(f'invalid regular expression option: "{f}"', "22023")
    return flags, every, quoted


def regexp_replace(text: str, pattern: str, replacement: str, flags: str = "") -> str:
    re_flags, every, quoted = _flags(flags)
    compiled = _compile(pattern, re_flags, quoted)

    def substitute(match: re.Match[str]) -> str:
        out: list[str] = []
        i = 0
        while i < len(replacement):
            c = replacement[i]
            if c == "\\" and i + 1 < len(replacement):
                nxt = replacement[i + 1]
                if nxt.isdigit() and nxt != "0":
                    n = int(nxt)
                    if n <= compiled.groups:
                        out.append(match.group(n) or "")
                    i += 2
                    continue
                if nxt == "&":
                    out.append(match.group(0))
                    i += 2
                    continue
                if nxt == "\\":
                    out.append("\\")
                    i += 2
                    continue
            out.append(c)
            i += 1
        return "".join(out)

    return compiled.sub(substitute, text, count=0 if every else 1)


def regex_match(text: str, pattern: str) -> bool:
    return _compile(pattern, re.ASCII).search(text) is not None


def regex_imatch(text: str, pattern: str) -> bool:
    return _compile(pattern, re.ASCII | re.IGNORECASE).search(text) is not None


def initcap(text: str) -> str:
    """Each run of letters and digits: first upper case, the rest lower
    (ASCII letters only: the C locale's classes, see the module docstring)."""
    out: list[str] = []
    in_word = False
    for c in text:
        ascii_ = c.isascii()
        out.append(c if not ascii_ else c.lower() if in_word else c.upper())
        in_word = ascii_ and c.isalnum()
    return "".join(out)


def ascii_(text: str) -> int:
    return ord(text[0]) if text else 0


def chr_(code: int) -> str:
    if code == 0:
        raise FunctionError("null character not permitted", "54000")
    if code < 0:
        raise FunctionError("character number must be positive", "22023")
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        raise FunctionError("requested character too large for encoding: " + str(code), "54000")
    return chr(code)


def translate(text: str, source: str, target: str) -> str:
    """Each character of `source` in `text` becomes the one at its position
    in `target`, or is deleted where `target` is shorter (first one wins)."""
    table: dict[str, str] = {}
    for i, c in enumerate(source):
        table.setdefault(c, target[i] if i < len(target) else "")
    return "".join(table.get(c, c) for c in text)


# --- date/time: date +/- integer, date - date, make_date, make_timestamp, AT TIME ZONE
# (compute/spark_functions.py renders the arithmetic and AT TIME ZONE natively;
# make_date and make_timestamp run there as UDFs of these).


def date_add_days(value: dt.date, days: int) -> dt.date:
    try:
        return value + dt.timedelta(days=days)
    except OverflowError:
        raise FunctionError("date out of range", "22008") from None


def date_sub_days(value: dt.date, days: int) -> dt.date:
    return date_add_days(value, -days)


def date_diff_days(a: dt.date, b: dt.date) -> int:
    return (a - b).days


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


def timezone_to_local(value: dt.datetime, zone: str) -> dt.datetime:
    """`timestamptz AT TIME ZONE zone`: the wall-clock time there."""
    try:
        return value.astimezone(_zone(zone)).replace(tzinfo=None)
    except OverflowError:
        raise FunctionError("timestamp out of range", "22008") from None


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


EXTRA_BUILTINS: dict[str, Callable[..., Any]] = {
    "ln": ln,
    "log10": log10,
    "log_base": log_base,
    "exp": exp,
    "trunc": trunc,
    "trunc_to": trunc_to,
    "sign": sign,
    "pi": pi,
    "div": div,
    "regexp_replace": regexp_replace,
    "regex_match": regex_match,
    "regex_imatch": regex_imatch,
    "initcap": initcap,
    "ascii": ascii_,
    "chr": chr_,
    "translate": translate,
    "date_add_days": date_add_days,
    "date_sub_days": date_sub_days,
    "date_diff_days": date_diff_days,
    "make_date": make_date,
    "make_timestamp": make_timestamp,
    "timezone_to_local": timezone_to_local,
    "timezone_from_local": timezone_from_local,
}

__all__ = ["EXTRA_BUILTINS", "zone_name"]
