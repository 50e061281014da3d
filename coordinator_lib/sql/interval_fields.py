"""`extract(field FROM INTERVAL '...')` of a constant interval (Tidemark
has no interval column type: an interval is a constant of date and
timestamp arithmetic), folded to the numeric PostgreSQL 14 and Materialize
return: the fields of (months, days, microseconds) split with truncating
division as PostgreSQL's interval2tm does; epoch counts a year as 365.25
days and a month as 30."""

from __future__ import annotations

from decimal import Decimal

from coordinator_lib.expr.functions.datetime import normalize_unit
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.sql.errors import UnsupportedFeature
from coordinator_lib.sql.typed import Typed, literal

_MINUTE = 60_000_000
_HOUR = 60 * _MINUTE


def _trunc(a: int, b: int) -> int:
    """C's integer division (toward zero), as PostgreSQL's."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def interval_field(field: str, months: int, days: int, micros: int, position: int | None) -> Typed:
    unit = normalize_unit(field)
    hours = _trunc(micros, _HOUR)
    rest = micros - hours * _HOUR
    minutes = _trunc(rest, _MINUTE)
    seconds = rest - minutes * _MINUTE  # microseconds of the seconds field
    years = _trunc(months, 12)
    fields: dict[str, Decimal | int] = {
        "microseconds": seconds,
        "milliseconds": Decimal(seconds) / 1000,
        "second": Decimal(seconds) / 1_000_000,
        "minute": minutes,
        "hour": hours,
        "day": days,
        "month": months - years * 12,
        "quarter": _trunc(months - years * 12, 3) + 1,
        "year": years,
        "decade": _trunc(years, 10),
        "century": _trunc(years, 100),
        "millennium": _trunc(years, 1000),
        "epoch": Decimal(years) * Decimal("31557600")
        + Decimal(months - years * 12) * 2_592_000
        + Decimal(days) * 86_400
        + Decimal(micros) / 1_000_000,
    }
    if unit not in fields:
        raise UnsupportedFeature(f'interval units "{field.lower()}" not supported', position)
    return literal(Decimal(fields[unit]), ScalarType.NUMERIC)


__all__ = ["interval_field"]
