"""More built-in functions with PostgreSQL's semantics, in Python (the
binder is `sql/builtins_extra.py`):

- math: ln, exp, log (base 10, or log(b, x) of numeric), trunc (also
  trunc(numeric, places)), sign, pi, div (numeric quotient truncated
  toward zero). numeric ln/exp/log are computed in double precision, as
  numeric sqrt and power are.
- date/time: date +/- integer, date - date, make_date, make_timestamp,
  AT TIME ZONE (zoneinfo), to_char(timestamp, template) (PostgreSQL's
  template patterns; a UDF on Spark). Spark renders the arithmetic and AT TIME ZONE
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
import json
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


# --- to_char(timestamp | timestamptz | date, template) ------------------------------
# PostgreSQL's formatting.c: keywords matched in its table's order (the first
# that prefixes the rest of the template), an FM prefix, "quoted text" (a
# backslash quotes the next character there; outside, only before a quote),
# anything else copied. The binder (sql/builtins_extra.py) refuses templates
# with keywords or suffixes not implemented here (`to_char_template`).


def _words(text: str) -> list[str]:
    return text.split()


_TO_CHAR_KEYWORDS = _words(
    "A.D. A.M. AD AM B.C. BC CC DAY DDD DD DY Day Dy D FF1 FF2 FF3 FF4 FF5 FF6 FX "
    "HH24 HH12 HH IDDD ID IW IYYY IYY IY I J MI MM MONTH MON MS Month Mon OF P.M. PM "
    "Q RM SSSSS SSSS SS TZH TZM TZ US WW W Y,YYY YYYY YYY YY Y "
    "a.d. a.m. ad am b.c. bc cc day ddd dd dy d ff1 ff2 ff3 ff4 ff5 ff6 fx "
    "hh24 hh12 hh iddd id iw iyyy iyy iy i j mi mm month mon ms of p.m. pm "
    "q rm sssss ssss ss tzh tzm tz us ww w y,yyy yyyy yyy yy y"
)
# Keywords that print the same in either case (PostgreSQL maps the lower
# case ones to the upper case action).
_CASELESS = frozenset(
    _words(
        "cc ddd dd d ff1 ff2 ff3 ff4 ff5 ff6 fx hh24 hh12 hh iddd id iw iyyy iyy iy i j "
        "mi mm ms of q sssss ssss ss tzh tzm us ww w y,yyy yyyy yyy yy y"
    )
)
TO_CHAR_SUPPORTED = frozenset(
    _words(
        "A.D. A.M. AD AM B.C. BC CC DAY DDD DD DY Day Dy D HH24 HH12 HH J MI MM MONTH MON "
        "MS Month Mon P.M. PM Q SSSSS SSSS SS TZ US WW W Y,YYY YYYY YYY YY Y "
        "a.d. a.m. ad am b.c. bc day dy month mon p.m. pm tz"
    )
)
_MONTHS = _words(
    "January February March April May June July August September October November December"
)
_DAYS = _words("Sunday Monday Tuesday Wednesday Thursday Friday Saturday")


@functools.lru_cache(maxsize=256)
def to_char_template(template: str) -> tuple[tuple[str, Any, bool], ...]:
    """The template as ('key', keyword, fill mode) and ('text', characters,
    False) items; ('suffix', name, False) marks a TH/th/SP/TM suffix."""
    out: list[tuple[str, Any, bool]] = []
    i, n = 0, len(template)
    while i < n:
        fill = False
        if template.startswith(("FM", "fm"), i):
            fill, i = True, i + 2
        elif template.startswith(("TM", "tm"), i):
            out.append(("suffix", template[i : i + 2], False))
            i += 2
        if i >= n:
            break
        key = next((k for k in _TO_CHAR_KEYWORDS if template.startswith(k, i)), None)
        if key is not None:
            i += len(key)
            out.append(("key", key.upper() if key in _CASELESS else key, fill))
            if template.startswith(("TH", "th", "SP"), i):
                out.append(("suffix", template[i : i + 2], False))
                i += 2
        elif template[i] == '"':
            i += 1
            while i < n and template[i] != '"':
                if template[i] == "\\" and i + 1 < n:
                    i += 1
                out.append(("text", template[i], False))
                i += 1
            i += 1
        else:
            if template[i] == "\\" and template.startswith('"', i + 1):
                i += 1
            out.append(("text", template[i], False))
            i += 1
    return tuple(out)


def _fill(value: int, width: int, fill: bool) -> str:
    return str(value) if fill else f"{value:0{width}d}"


def _to_char_field(key: str, fill: bool, t: dt.datetime, zone: str) -> str:
    upper = key.upper()
    hour = t.hour
    if upper in ("AM", "PM"):
        text = "PM" if hour >= 12 else "AM"
        return text if key.isupper() else text.lower()
    if upper in ("A.M.", "P.M."):
        text = "P.M." if hour >= 12 else "A.M."
        return text if key.isupper() else text.lower()
    if upper in ("AD", "BC", "A.D.", "B.C."):  # years 1 to 9999: always AD
        text = "A.D." if "." in key else "AD"
        return text if key.isupper() else text.lower()
    if upper in ("MONTH", "MON", "DAY", "DY"):
        full = _MONTHS[t.month - 1] if upper.startswith("MON") else _DAYS[t.isoweekday() % 7]
        text = full[:3] if upper in ("MON", "DY") else full
        if key.isupper():
            text = text.upper()
        elif key.islower():
            text = text.lower()
        return text if fill or upper in ("MON", "DY") else f"{text:<9}"
    if upper == "TZ":
        return zone if key.isupper() else zone.lower()
    if upper in ("HH", "HH12"):
        return _fill(hour % 12 or 12, 2, fill)
    simple = {
        "HH24": (hour, 2),
        "MI": (t.minute, 2),
        "SS": (t.second, 2),
        "MM": (t.month, 2),
        "DD": (t.day, 2),
        "DDD": (t.timetuple().tm_yday, 3),
        "WW": ((t.timetuple().tm_yday - 1) // 7 + 1, 2),
        "CC": ((t.year + 99) // 100, 2),
    }
    if upper in simple:
        value, width = simple[upper]
        return _fill(value, width, fill)
    if upper == "MS":
        return f"{t.microsecond // 1000:03d}"
    if upper == "US":
        return f"{t.microsecond:06d}"
    if upper in ("SSSS", "SSSSS"):
        return str(hour * 3600 + t.minute * 60 + t.second)
    if upper == "D":
        return str(t.isoweekday() % 7 + 1)
    if upper == "W":
        return str((t.day - 1) // 7 + 1)
    if upper == "Q":
        return str((t.month - 1) // 3 + 1)
    if upper == "J":
        return str(t.toordinal() + 1721425)
    if upper == "Y,YYY":
        return f"{t.year // 1000},{t.year % 1000:03d}"
    if upper == "YYYY":
        return _fill(t.year, 4, fill)
    width = len(upper)  # YYY, YY, Y: the last digits
    return _fill(t.year, width, fill)[-width:]


def to_char(value: dt.datetime | dt.date, template: str, zone: str) -> str:
    """PostgreSQL's to_char of a timestamp (naive; a timestamptz the binder
    casts to UTC) and `zone`, the name TZ prints ("" for a timestamp)."""
    if not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    elif value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    parts = []
    for kind, item, fill in to_char_template(template):
        if kind == "text":
            parts.append(item)
        elif kind == "key":
            parts.append(_to_char_field(item, fill, value, zone))
    return "".join(parts)


def _json_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | decimal.Decimal) or (
        isinstance(value, float) and math.isfinite(value)
    ):
        return str(value)
    if isinstance(value, dt.datetime | dt.date):
        return json.dumps(value.isoformat())
    return json.dumps(str(value))


def json_build_object(*args: Any) -> str:
    """json_build_object(k1, v1, ...): keys as text, values as JSON (numbers
    and booleans as themselves, NULL as null, the rest as strings)."""
    if len(args) % 2:
        raise ValueError("argument list must have even number of elements")
    if any(key is None for key in args[::2]):
        raise ValueError("null value not allowed for object key")
    pairs = (
        f"{json.dumps(str(k))}: {_json_value(v)}"
        for k, v in zip(args[::2], args[1::2], strict=True)
    )
    return "{" + ", ".join(pairs) + "}"


def array_contains(values: Any, x: Any) -> bool | None:
    """`x = ANY (values)` with PostgreSQL's NULLs: TRUE if an element equals
    x, else NULL if an element is NULL, else FALSE."""
    if any(v is not None and v == x for v in values):
        return True
    return None if any(v is None for v in values) else False


EXTRA_BUILTINS: dict[str, Callable[..., Any]] = {
    "json_build_object": json_build_object,
    "array_contains": array_contains,
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
    "to_char": to_char,
}

__all__ = ["EXTRA_BUILTINS", "TO_CHAR_SUPPORTED", "to_char_template", "zone_name"]
