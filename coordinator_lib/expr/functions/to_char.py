"""to_char(timestamp, template) with PostgreSQL's template patterns (a UDF
on Spark).

PostgreSQL's formatting.c: keywords matched in its table's order (the first
that prefixes the rest of the template), an FM prefix, "quoted text" (a
backslash quotes the next character there; outside, only before a quote),
anything else copied. The binder refuses templates with keywords or
suffixes not implemented here (`to_char_template`, `TO_CHAR_SUPPORTED`); it
passes a timestamptz or date as its UTC wall clock and the zone name TZ
prints as the third argument.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any

from coordinator_lib.expr.functions.registry import scalar_function, sig
from coordinator_lib.repr.relation import ScalarType

S = ScalarType


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


@scalar_function("to_char", sig(S.TIMESTAMP, S.TEXT, S.TEXT, result=S.TEXT))
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
