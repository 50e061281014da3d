"""PostgreSQL's interval: months, days and microseconds kept apart.

A month has no fixed length and a day may not be 24 hours across a time
zone change, so PostgreSQL never folds one field into another: '1 month'
and '30 days' are different values that add to timestamps differently
('2020-01-31' + '1 month' is Feb 29). They compare equal, though:
comparison and ORDER BY use one number, the microseconds when a month is
30 days and a day 24 hours (`cmp_key`, PostgreSQL's interval_cmp_value).

Stored as a struct of the three fields (Arrow and Parquet; Spark reads the
same struct), so both engines and persist hold exactly what PostgreSQL does.
"""

from __future__ import annotations

import decimal
import re
from dataclasses import dataclass
from typing import Any

DAY_MICROS = 86_400_000_000
MONTH_DAYS = 30
FIELDS = ("months", "days", "micros")
_INT32 = 2**31
_INT64 = 2**63


class IntervalOutOfRange(ValueError):
    """A result past int32 months/days or int64 microseconds (22008)."""

    def __init__(self) -> None:
        super().__init__("interval out of range")


def trunc_div(a: int, b: int) -> int:
    """C's integer division (toward zero), as PostgreSQL's."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


@dataclass(frozen=True, slots=True)
class Interval:
    months: int
    days: int
    micros: int

    def __post_init__(self) -> None:
        if not (
            -_INT32 <= self.months < _INT32
            and -_INT32 <= self.days < _INT32
            and -_INT64 <= self.micros < _INT64
        ):
            raise IntervalOutOfRange

    def cmp_key(self) -> int:
        """PostgreSQL's order: microseconds with 30-day months and 24-hour days."""
        return (self.months * MONTH_DAYS + self.days) * DAY_MICROS + self.micros

    def __lt__(self, other: Interval) -> bool:
        return self._order() < other._order()

    def __le__(self, other: Interval) -> bool:
        return self._order() <= other._order()

    def __gt__(self, other: Interval) -> bool:
        return self._order() > other._order()

    def __ge__(self, other: Interval) -> bool:
        return self._order() >= other._order()

    def _order(self) -> tuple[int, int, int]:
        # equal keys ('1 mon', '30 days') are tied by their fields so that
        # sorting is deterministic; SQL's = compares cmp_key only.
        return (self.cmp_key(), self.months, self.days)

    def __str__(self) -> str:
        return format_interval(self)

    def as_struct(self) -> dict[str, int]:
        return {"months": self.months, "days": self.days, "micros": self.micros}


ZERO = Interval(0, 0, 0)


def from_struct(value: Any) -> Any:
    """An Interval from its stored struct (a dict from Arrow, a Row from
    Spark); other values as they are."""
    if isinstance(value, dict) and tuple(value) == FIELDS:
        return Interval(value["months"], value["days"], value["micros"])
    fields = getattr(value, "__fields__", None)
    if fields is not None and tuple(fields) == FIELDS:
        return Interval(*value)
    return value


def to_struct(value: Any) -> Any:
    """An Interval as a Spark UDF returns a struct (a tuple of its fields);
    other values as they are."""
    if isinstance(value, Interval):
        return (value.months, value.days, value.micros)
    return value


def _part(value: int, unit: str, first: bool, before: bool) -> str:
    """PostgreSQL's AddPostgresIntPart: a field with its sign, `+` when a
    negative field came before."""
    sign = "+" if before and value > 0 else ""
    return f"{'' if first else ' '}{sign}{value} {unit}{'' if value == 1 else 's'}"


def format_interval(value: Interval) -> str:
    """The text PostgreSQL prints (IntervalStyle postgres): `1 year 2 mons
    3 days 04:05:06.5`, `-1 years -2 mons`, `00:00:00`."""
    years, mons = trunc_div(value.months, 12), value.months - trunc_div(value.months, 12) * 12
    out, first, before = [], True, False
    for amount, unit in ((years, "year"), (mons, "mon"), (value.days, "day")):
        if amount:
            out.append(_part(amount, unit, first, before))
            first, before = False, amount < 0
    micros = value.micros
    if first or micros:
        hours = trunc_div(micros, 3_600_000_000)
        rest = micros - hours * 3_600_000_000
        minutes = trunc_div(rest, 60_000_000)
        rest -= minutes * 60_000_000
        sign = "-" if micros < 0 else ("+" if before else "")
        seconds = f"{abs(rest) // 1_000_000:02d}"
        fraction = abs(rest) % 1_000_000
        if fraction:
            seconds += f".{fraction:06d}".rstrip("0")
        space = "" if first else " "
        out.append(f"{space}{sign}{abs(hours):02d}:{abs(minutes):02d}:{seconds}")
    return "".join(out)


# unit -> (months, days, microseconds) per 1, and the spellings PostgreSQL reads
_UNITS: dict[str, tuple[int, int, int]] = {
    "microsecond": (0, 0, 1),
    "millisecond": (0, 0, 1_000),
    "second": (0, 0, 1_000_000),
    "minute": (0, 0, 60_000_000),
    "hour": (0, 0, 3_600_000_000),
    "day": (0, 1, 0),
    "week": (0, 7, 0),
    "month": (1, 0, 0),
    "quarter": (3, 0, 0),
    "year": (12, 0, 0),
    "decade": (120, 0, 0),
    "century": (1200, 0, 0),
    "millennium": (12000, 0, 0),
}
_SPELLINGS = {
    **{unit: unit for unit in _UNITS},
    **{unit + "s": unit for unit in _UNITS},
    "us": "microsecond",
    "usec": "microsecond",
    "usecs": "microsecond",
    "ms": "millisecond",
    "msec": "millisecond",
    "msecs": "millisecond",
    "s": "second",
    "sec": "second",
    "secs": "second",
    "m": "minute",
    "min": "minute",
    "mins": "minute",
    "h": "hour",
    "hr": "hour",
    "hrs": "hour",
    "d": "day",
    "w": "week",
    "mon": "month",
    "mons": "month",
    "y": "year",
    "yr": "year",
    "yrs": "year",
    "centuries": "century",
    "millennia": "millennium",
}
_CLOCK = re.compile(r"([+-])?(\d+):(\d{1,2})(?::(\d{1,2}(?:\.\d*)?))?")
_MINUTES_SECONDS = re.compile(r"([+-])?(\d+):(\d{1,2}(?:\.\d*)?)")
_YEARS_MONTHS = re.compile(r"([+-])?(\d+)-(\d+)")
_NUMBER_UNIT = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))([a-z]+)")
# SQL's interval qualifiers (INTERVAL '...' DAY TO MINUTE): the unit a bare
# number means is the last field named.
QUALIFIERS = (
    "YEAR",
    "MONTH",
    "DAY",
    "HOUR",
    "MINUTE",
    "SECOND",
    "YEAR TO MONTH",
    "DAY TO HOUR",
    "DAY TO MINUTE",
    "DAY TO SECOND",
    "HOUR TO MINUTE",
    "HOUR TO SECOND",
    "MINUTE TO SECOND",
)


class IntervalFieldOverflow(ValueError):
    """A field past its range in the input ('1-13' YEAR TO MONTH): 22015."""


def _bad(text: str) -> ValueError:
    return ValueError(f'invalid input syntax for type interval: "{text}"')


class _Fields:
    """The sums PostgreSQL's DecodeInterval builds: fractions of a unit
    carry down (a month is 30 days, a day 24 hours)."""

    def __init__(self, text: str) -> None:
        self.text, self.months, self.days, self.micros = text, 0, 0, 0
        self.seen: set[str] = set()

    def mark(self, *fields: str) -> None:
        if self.seen.intersection(fields):
            raise _bad(self.text)
        self.seen.update(fields)

    def add(self, amount: decimal.Decimal, unit: str) -> None:
        m, d, us = _UNITS[unit]
        whole_months = amount * m
        self.months += int(whole_months)
        whole_days = amount * d + (whole_months - int(whole_months)) * MONTH_DAYS
        self.days += int(whole_days)
        fraction = amount * us + (whole_days - int(whole_days)) * DAY_MICROS
        self.micros += int(fraction.to_integral_value(decimal.ROUND_HALF_EVEN))

    def interval(self, sign: int = 1) -> Interval:
        try:
            return Interval(sign * self.months, sign * self.days, sign * self.micros)
        except IntervalOutOfRange:
            raise IntervalFieldOverflow(
                f'interval field value out of range: "{self.text}"'
            ) from None


def _clock(fields: _Fields, token: str, qualifier: str | None) -> bool:
    """A time token (`04:05:06.5`, `-2:03`; `4:05` is minutes and seconds
    under MINUTE TO SECOND). False when `token` is not one."""
    minutes = _MINUTES_SECONDS.fullmatch(token) if qualifier == "MINUTE TO SECOND" else None
    clock = None if minutes else _CLOCK.fullmatch(token)
    if minutes is None and clock is None:
        return False
    fields.mark("hour", "minute", "second")
    if minutes is not None:
        sign, total, seconds = minutes.group(1), int(minutes.group(2)) * 60, minutes.group(3)
    else:
        assert clock is not None
        sign, seconds = clock.group(1), clock.group(4) or "0"
        total = int(clock.group(2)) * 3600 + int(clock.group(3)) * 60
    micros = int((total + decimal.Decimal(seconds)) * 1_000_000)
    fields.micros += -micros if sign == "-" else micros
    return True


def _default_unit(qualifier: str | None) -> str:
    """The unit of a number without one: the qualifier's last field."""
    return (qualifier or "SECOND").split()[-1].lower()


def _postgres_form(text: str, qualifier: str | None) -> Interval:
    """PostgreSQL's own input (DecodeInterval), read right to left as it
    does: `1 day 02:03:04`, `1-2` (years-months), `1 2:03` (a number before
    a time is days), a bare number in the qualifier's last field."""
    tokens: list[str] = []
    for token in text.lower().replace(",", " ").split():
        glued = _NUMBER_UNIT.fullmatch(token)
        tokens += [glued.group(1), glued.group(2)] if glued else [token]
    if tokens and tokens[0] == "@":
        tokens = tokens[1:]
    ago = bool(tokens) and tokens[-1] == "ago"
    if ago:
        tokens = tokens[:-1]
    if not tokens:
        raise _bad(text)
    fields = _Fields(text)
    unit: str | None = None  # the unit the next number (to the left) is in
    for token in reversed(tokens):
        if token in _SPELLINGS:
            unit = _SPELLINGS[token]
            continue
        if _clock(fields, token, qualifier):
            unit = "day"
            continue
        years_months = _YEARS_MONTHS.fullmatch(token)
        if years_months:
            sign, years, months = years_months.groups()
            if int(months) >= 12:
                raise IntervalFieldOverflow(f'interval field value out of range: "{text}"')
            fields.mark("month")
            total = int(years) * 12 + int(months)
            fields.months += -total if sign == "-" else total
            unit = "month"
            continue
        try:
            amount = decimal.Decimal(token)
        except decimal.InvalidOperation:
            raise _bad(text) from None
        if not amount.is_finite():
            raise _bad(text)
        unit = unit or _default_unit(qualifier)
        fields.mark(unit)  # each unit once ('1 week 2 days' is fine, '1 day 2 days' not)
        fields.add(amount, unit)
        if unit == "hour":
            unit = "day"
    return fields.interval(-1 if ago else 1)


_ISO_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
_ISO_DATE_UNITS = {"Y": "year", "M": "month", "W": "week", "D": "day"}
_ISO_TIME_UNITS = {"H": "hour", "M": "minute", "S": "second"}


def _iso8601_form(text: str) -> Interval:
    """ISO 8601's `P1Y2M3DT4H5M6S` and its alternative format
    `P0001-02-03T04:05:06` (or `P00010203T040506`), as PostgreSQL's
    DecodeISO8601Interval reads them (case matters; no sign before P)."""
    fields = _Fields(text)
    rest, in_time, first = text[1:], False, True
    if not rest:
        raise _bad(text)
    while rest:
        if rest[0] == "T":  # the time part begins (PostgreSQL takes a repeated T)
            rest, in_time, first = rest[1:], True, True
            continue
        number = _ISO_NUMBER.match(rest)
        if number is None:
            raise _bad(text)
        amount = decimal.Decimal(number.group())
        rest = rest[number.end() :]
        designator = rest[:1]
        units = _ISO_TIME_UNITS if in_time else _ISO_DATE_UNITS
        if designator in units:
            fields.add(amount, units[designator])
            rest, first = rest[1:], False
            continue
        if not first or designator not in ("", "T", "-", ":"):
            raise _bad(text)
        basic = len(number.group().lstrip("+-").split(".")[0]) == (6 if in_time else 8)
        rest = _alternative(fields, amount, rest, in_time, basic and designator != "-", text)
        first = False
        if rest and not rest.startswith("T"):
            raise _bad(text)
    return fields.interval()


def _alternative(
    fields: _Fields, amount: decimal.Decimal, rest: str, in_time: bool, basic: bool, text: str
) -> str:
    """ISO 8601's alternative format, after its first number: basic
    (YYYYMMDD, HHMMSS: eight or six digits) or extended (YYYY-MM-DD,
    HH:MM:SS, any leading part). Returns what follows."""
    units = ("hour", "minute", "second") if in_time else ("year", "month", "day")
    separator = ":" if in_time else "-"
    if basic:  # one number holds all three
        whole = int(amount)
        fields.add(decimal.Decimal(whole // 10000), units[0])
        fields.add(decimal.Decimal(whole // 100 % 100), units[1])
        fields.add(decimal.Decimal(whole % 100) + amount - whole, units[2])
        return rest
    fields.add(amount, units[0])
    for unit in units[1:]:
        if not rest.startswith(separator):
            break
        number = _ISO_NUMBER.match(rest[1:])
        if number is None:
            raise _bad(text)
        fields.add(decimal.Decimal(number.group()), unit)
        rest = rest[1 + number.end() :]
    return rest


def restrict(value: Interval, qualifier: str | None, precision: int | None) -> Interval:
    """PostgreSQL's AdjustIntervalForTypmod: the fields right of the
    qualifier's last are dropped (YEAR keeps whole years), and the seconds
    rounded to `precision` digits (half away from zero)."""
    months, days, micros = value.months, value.days, value.micros
    last = _default_unit(qualifier) if qualifier else "second"
    if last in ("year", "month"):
        days = micros = 0
        if last == "year":
            months = trunc_div(months, 12) * 12
    elif last == "day":
        micros = 0
    elif last in ("hour", "minute"):
        step = 3_600_000_000 if last == "hour" else 60_000_000
        micros = trunc_div(micros, step) * step
    if precision is not None and precision < 6:
        factor = 10 ** (6 - precision)
        magnitude = (abs(micros) + factor // 2) // factor * factor
        micros = magnitude if micros >= 0 else -magnitude
    return Interval(months, days, micros)


def parse_interval(
    text: str, qualifier: str | None = None, precision: int | None = None
) -> Interval:
    """An interval from PostgreSQL's input forms: `1 day`, `2 hours 30
    minutes`, `-1 year -2 mons 3 days 04:05:06.5`, `1.5 days`, `90 min`,
    `1h`, `1-2`, `1 2:03`, a bare number (seconds, or the qualifier's last
    field), `... ago`, and ISO 8601 (`P1Y2M3DT4H5M6S`,
    `P0001-02-03T04:05:06`); then restricted to `qualifier` (one of
    QUALIFIERS) and `precision`. Raises ValueError (IntervalFieldOverflow
    for a field out of range)."""
    stripped = text.strip()
    if stripped.startswith("P"):
        return restrict(_iso8601_form(stripped), qualifier, precision)
    return restrict(_postgres_form(text, qualifier), qualifier, precision)


__all__ = [
    "DAY_MICROS",
    "FIELDS",
    "MONTH_DAYS",
    "QUALIFIERS",
    "ZERO",
    "Interval",
    "IntervalFieldOverflow",
    "IntervalOutOfRange",
    "format_interval",
    "from_struct",
    "parse_interval",
    "restrict",
    "to_struct",
    "trunc_div",
]
