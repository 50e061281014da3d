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
_NUMBER_UNIT = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))([a-z]+)")


def parse_interval(text: str) -> Interval:
    """An interval from PostgreSQL's input forms: `1 day`, `2 hours 30
    minutes`, `-1 year -2 mons 3 days 04:05:06.5`, `1.5 days`, `90 min`,
    `1h`, a bare number of seconds, `... ago`. Fractions carry down as
    PostgreSQL's do (a month is 30 days, a day 24 hours). Raises ValueError."""
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
        raise ValueError(f'invalid input syntax for type interval: "{text}"')
    months = days = micros = 0
    i = 0
    try:
        while i < len(tokens):
            clock = _CLOCK.fullmatch(tokens[i])
            if clock:
                sign = -1 if clock.group(1) == "-" else 1
                seconds = decimal.Decimal(clock.group(4) or 0)
                total = int(clock.group(2)) * 3600 + int(clock.group(3)) * 60
                micros += sign * int((total + seconds) * 1_000_000)
                i += 1
                continue
            amount = decimal.Decimal(tokens[i])
            unit = _SPELLINGS[tokens[i + 1]] if i + 1 < len(tokens) else "second"
            m, d, us = _UNITS[unit]
            whole_months = amount * m
            months += int(whole_months)
            whole_days = amount * d + (whole_months - int(whole_months)) * MONTH_DAYS
            days += int(whole_days)
            micros += int(
                (amount * us + (whole_days - int(whole_days)) * DAY_MICROS).to_integral_value(
                    decimal.ROUND_HALF_EVEN
                )
            )
            i += 2
    except (KeyError, decimal.InvalidOperation, IndexError):
        raise ValueError(f'invalid input syntax for type interval: "{text}"') from None
    sign = -1 if ago else 1
    try:
        return Interval(sign * months, sign * days, sign * micros)
    except IntervalOutOfRange:
        raise ValueError(f'interval field value out of range: "{text}"') from None


__all__ = [
    "DAY_MICROS",
    "FIELDS",
    "MONTH_DAYS",
    "ZERO",
    "Interval",
    "IntervalOutOfRange",
    "format_interval",
    "from_struct",
    "parse_interval",
    "to_struct",
    "trunc_div",
]
