"""PostgreSQL's `time` (without time zone): a time of day to the
microsecond, held as Python's datetime.time; its text in and out."""

from __future__ import annotations

import datetime as dt
import re

DAY_MICROS = 86_400_000_000
_TIME = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?")


class TimeOutOfRange(ValueError):
    """A field past its range (22008)."""


def format_time(value: dt.time) -> str:
    """`HH:MM:SS[.ffffff]`, trailing zeros of the fraction dropped (PostgreSQL's)."""
    text = f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    return text


def time_micros(value: dt.time) -> int:
    """Microseconds since midnight."""
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond


def time_from_micros(micros: int) -> dt.time:
    """The time of day `micros` after midnight, wrapped into one day (as
    PostgreSQL's time + interval wraps)."""
    micros %= DAY_MICROS
    seconds, micro = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return dt.time(hour, minute, second, micro)


def parse_time(text: str) -> dt.time:
    """`HH:MM[:SS[.fraction]]` (digits beyond microseconds rounded half up,
    as PostgreSQL's input). Raises ValueError, TimeOutOfRange for a field
    out of range (and for 24:00:00, which PostgreSQL accepts)."""
    match = _TIME.fullmatch(text.strip())
    if match is None:
        raise ValueError(f'invalid input syntax for type time: "{text}"')
    hour, minute, second = int(match[1]), int(match[2]), int(match[3] or 0)
    digits = (match[4] or "").ljust(7, "0")
    micros = int(digits[:6]) + (digits[6] >= "5")
    if hour > 23 or minute > 59 or second > 59:
        raise TimeOutOfRange(f'date/time field value out of range: "{text}"')
    total = ((hour * 60 + minute) * 60 + second) * 1_000_000 + micros
    if total >= DAY_MICROS:
        raise TimeOutOfRange(f'date/time field value out of range: "{text}"')
    return time_from_micros(total)


__all__ = [
    "DAY_MICROS",
    "TimeOutOfRange",
    "format_time",
    "parse_time",
    "time_from_micros",
    "time_micros",
]
