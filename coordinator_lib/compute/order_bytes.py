"""Bytes whose order follows ORDER BY's, for arrangements kept in order.

TopK and MIN/MAX keep each group's rows in the store ordered by `ord`
(persist/arrangement_store.py, `ordered`), so a step reads a touched
group's first rows, not all of them. `ord` need not tell every two values
apart, only never put a greater value first: for values a before b in the
order (local_ordered.compare_values), ord(a) <= ord(b). Reading the first
n rows and every row tied with the last in `ord` then holds the true first
n. So each value is 9 bytes: where NULL goes, then 8 bytes of its order as
a number (a double: rounding is monotone), or of a text's first 8 UTF-8
bytes (byte order is code point order); a value of another type is 0 (all
tied: the group is read whole, still exact).

A row's bytes (`row_ord`) are those of its first ORDER BY value only: a
value's bytes may tie with another's (texts sharing 8 bytes, integers past
a double's precision), and a next column appended after them would decide
between rows the first column orders the other way, putting a greater row
first. Rows tied on the first value are read together instead.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct
from collections.abc import Callable, Sequence
from typing import Any

from coordinator_lib.expr.relation import OrderKey
from coordinator_lib.repr.update import Row

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_ZERO = bytes(8)
_TOP = b"\xff" * 8  # NaN: above every number, as Spark orders it


def _number(value: float) -> bytes:
    """A double's 8 bytes in numeric order (sign flipped, negatives inverted)."""
    if math.isnan(value):
        return _TOP
    value += 0.0  # -0.0 equals 0.0: it must not come first
    (bits,) = struct.unpack(">Q", struct.pack(">d", value))
    bits = bits ^ 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | (1 << 63)
    return struct.pack(">Q", bits)


def _value(value: Any) -> bytes:
    if isinstance(value, bool | int | decimal.Decimal | float):
        try:
            return _number(float(value))
        except OverflowError:  # an int beyond a double's range
            return _number(math.inf if value > 0 else -math.inf)
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")[:8].ljust(8, b"\x00")
    if isinstance(value, bytes):
        return value[:8].ljust(8, b"\x00")
    if isinstance(value, dt.datetime):
        since = value - (_EPOCH if value.tzinfo is None else _EPOCH_UTC)
        return _number(since.total_seconds())
    if isinstance(value, dt.date):
        return _number(value.toordinal())
    if isinstance(value, dt.time):
        return _number(
            value.hour * 3600 + value.minute * 60 + value.second + value.microsecond / 1e6
        )
    if isinstance(value, dt.timedelta):
        return _number(value.total_seconds())
    return _ZERO


def ord_bytes(value: Any, desc: bool, nulls_last: bool) -> bytes:
    """One value's place in an ORDER BY key's order."""
    if value is None:
        return (b"\x02" if nulls_last else b"\x00") + _ZERO
    encoded = _value(value)
    if desc:
        encoded = bytes(b ^ 0xFF for b in encoded)
    return b"\x01" + encoded


def row_ord(order_key: Sequence[OrderKey]) -> Callable[[Row], bytes]:
    """A row's place in `order_key`'s order (TopK's), by its first key."""
    if not order_key:
        return lambda row: b""
    first = order_key[0]
    return lambda row: ord_bytes(row[first.column], first.desc, first.nulls_last)


__all__ = ["ord_bytes", "row_ord"]
