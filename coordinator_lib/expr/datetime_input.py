"""PostgreSQL's date and timestamp input forms (`'2000-01-01 1:2:3-6'`,
`'January 8, 1999 04:05'`, `'1999-01-08T04:05:06 America/New_York'`), read
into Python's datetime, as Materialize and PostgreSQL read them.

A value is a date, an optional time (after a space or `T`) and an optional
zone: `z`, an offset of hours (`-6`, `+05`, `+0530`, `+05:30:15`) or an IANA
name (`UTC`, `Europe/Berlin`, any case). Dates: `Y-M-D` (one- or two-digit
month and day), `YYYYMMDD`, `M/D/Y` (PostgreSQL's default MDY order), and a
month's name or abbreviation (`Jan 8 1999`, `8 January 1999`,
`January 8, 1999`, `1999-Jan-08`). Times: `h:m[:s[.fraction]]` (fractions
round to microseconds as PostgreSQL rounds them), `hhmmss`; `24:00:00` is the next day's
midnight and second 60 the next minute, as in PostgreSQL. `epoch` is
1970-01-01. Forms Python's datetime cannot hold (BC, years past 9999,
`infinity`) are refused.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from functools import cache

_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = r"(?P<mname>[a-z]+)\.?"
_DATES = [
    re.compile(r"(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})"),
    re.compile(r"(?P<y>\d{4})(?P<m>\d\d)(?P<d>\d\d)"),
    re.compile(r"(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<y>\d{4})"),
    re.compile(_MONTH + r" +(?P<d>\d{1,2}),? +(?P<y>\d{4})"),
    re.compile(r"(?P<d>\d{1,2})[ -]" + _MONTH + r"[ -](?P<y>\d{4})"),
    re.compile(r"(?P<y>\d{4})-" + _MONTH + r"-(?P<d>\d{1,2})"),
]
_TIME = re.compile(
    r"(?:\s*t\s*|\s+)(?:(?P<h>\d{1,2}):(?P<mi>\d{1,2})(?::(?P<s>\d{1,2})(?:\.(?P<f>\d*))?)?"
    r"|(?P<bh>\d\d)(?P<bmi>\d\d)(?P<bs>\d\d)(?:\.(?P<bf>\d*))?)"
)
_OFFSET = re.compile(r"(?P<sign>[+-])(?P<h>\d{1,2})(?::?(?P<m>\d\d)(?::?(?P<s>\d\d))?)?")
_MAX_OFFSET = dt.timedelta(hours=15, minutes=59, seconds=59)


class DatetimeOutOfRange(ValueError):
    """Well formed, but no such date or time (PostgreSQL's 22008), an
    offset beyond 15:59:59 (22009) or a zone name not known (22023, whose
    message names it)."""

    def __init__(self, message: str, code: str = "22008") -> None:
        super().__init__(message)
        self.code = code


def parse_datetime(text: str) -> dt.datetime:
    """`text` as a datetime, aware when it names a zone. ValueError when it
    is not a timestamp; DatetimeOutOfRange when a field is out of range."""
    day, time, zone = _parse(text)
    moment = day + time
    return moment.replace(tzinfo=zone) if zone is not None else moment


def parse_date(text: str) -> dt.date:
    """The date of `text` (a time and zone are read and ignored, as in
    PostgreSQL's date input)."""
    return _parse(text)[0].date()


def _parse(text: str) -> tuple[dt.datetime, dt.timedelta, dt.tzinfo | None]:
    body = text.strip().lower()
    if body == "epoch":
        return dt.datetime(1970, 1, 1), dt.timedelta(), None
    for form in _DATES:
        date = form.match(body)
        if date is not None:
            break
    else:
        raise ValueError(text)
    at = date.end()
    time = _TIME.match(body, at)
    if time is not None:
        at = time.end()
    zone = _zone(body[at:].strip())
    return _day(date), _time_of_day(time), zone


def _day(date: re.Match[str]) -> dt.datetime:
    fields = date.groupdict()
    month = _MONTHS.get(fields["mname"] or "") if fields.get("mname") else int(fields["m"])
    if month is None:
        raise ValueError(fields["mname"])
    try:
        return dt.datetime(int(fields["y"]), month, int(fields["d"]))
    except ValueError:
        raise DatetimeOutOfRange("date/time field value out of range") from None


def _time_of_day(time: re.Match[str] | None) -> dt.timedelta:
    if time is None:
        return dt.timedelta()
    t = time.groupdict()
    hour, minute = int(t["h"] or t["bh"]), int(t["mi"] or t["bmi"])
    second = int(t["s"] or t["bs"] or 0)
    fraction = t["f"] if t["f"] is not None else t["bf"] or ""
    # as PostgreSQL: rint of the fraction read as a double, in microseconds
    micros = round(float("0." + fraction) * 1_000_000) if fraction else 0
    too_late = hour == 24 and (minute, second, micros) != (0, 0, 0)
    if hour > 24 or minute > 59 or second > 60 or too_late:
        raise DatetimeOutOfRange("date/time field value out of range")
    return dt.timedelta(hours=hour, minutes=minute, seconds=second, microseconds=micros)


def _zone(text: str) -> dt.tzinfo | None:
    if not text:
        return None
    if text == "z":
        return dt.UTC
    offset = _OFFSET.fullmatch(text)
    if offset is not None:
        sign = -1 if offset["sign"] == "-" else 1
        delta = dt.timedelta(
            hours=int(offset["h"]), minutes=int(offset["m"] or 0), seconds=int(offset["s"] or 0)
        )
        if delta > _MAX_OFFSET:
            raise DatetimeOutOfRange("time zone displacement out of range", "22009")
        return dt.timezone(sign * delta)
    name = _zone_names().get(text)
    if name is not None:
        return zoneinfo.ZoneInfo(name)
    if re.fullmatch(r"[a-z][a-z0-9_/+-]*", text):
        raise DatetimeOutOfRange(f'time zone "{text}" not recognized', "22023")
    raise ValueError(text)


@cache
def _zone_names() -> dict[str, str]:
    """IANA zone names by their lower case (PostgreSQL ignores case)."""
    return {name.lower(): name for name in zoneinfo.available_timezones()} | {
        "utc": "UTC",
        "gmt": "GMT",
    }
