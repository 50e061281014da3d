"""PostgreSQL type OIDs and sizes for our scalar types, shared by pgwire's
RowDescription and the HTTP API's `desc` (the same numbers Materialize sends),
and the text/binary value formats both servers print values in."""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from coordinator_lib.repr.array import array_text
from coordinator_lib.repr.interval import Interval, format_interval
from coordinator_lib.repr.numeric import numeric_display
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.repr.text_map import format_map
from coordinator_lib.repr.time_of_day import DAY_MICROS, format_time, time_from_micros, time_micros
from coordinator_lib.sql.escape_string import invalid_byte_sequence


@dataclass(frozen=True)
class PgType:
    oid: int
    name: str
    size: int  # typlen: -1 for variable length


PG_TYPES: dict[ScalarType, PgType] = {
    ScalarType.BOOLEAN: PgType(16, "bool", 1),
    ScalarType.SMALLINT: PgType(21, "int2", 2),
    ScalarType.INTEGER: PgType(23, "int4", 4),
    ScalarType.BIGINT: PgType(20, "int8", 8),
    ScalarType.REAL: PgType(700, "float4", 4),
    ScalarType.DOUBLE: PgType(701, "float8", 8),
    ScalarType.NUMERIC: PgType(1700, "numeric", -1),
    ScalarType.TEXT: PgType(25, "text", -1),
    ScalarType.BPCHAR: PgType(1042, "bpchar", -1),
    ScalarType.BYTEA: PgType(17, "bytea", -1),
    ScalarType.DATE: PgType(1082, "date", 4),
    ScalarType.TIMESTAMP: PgType(1114, "timestamp", 8),
    ScalarType.TIMESTAMPTZ: PgType(1184, "timestamptz", 8),
    ScalarType.JSONB: PgType(3802, "jsonb", -1),
    ScalarType.INTERVAL: PgType(1186, "interval", 16),
    ScalarType.TIME: PgType(1083, "time", 8),
    # Sent as text: PostgreSQL clients have no map type.
    **{st: PgType(25, "text", -1) for st in ScalarType if st.is_map},
    # Arrays (array_agg's results): PostgreSQL's `_<element>` types.
    ScalarType.BOOLEAN_ARRAY: PgType(1000, "_bool", -1),
    ScalarType.SMALLINT_ARRAY: PgType(1005, "_int2", -1),
    ScalarType.INTEGER_ARRAY: PgType(1007, "_int4", -1),
    ScalarType.BIGINT_ARRAY: PgType(1016, "_int8", -1),
    ScalarType.REAL_ARRAY: PgType(1021, "_float4", -1),
    ScalarType.DOUBLE_ARRAY: PgType(1022, "_float8", -1),
    ScalarType.NUMERIC_ARRAY: PgType(1231, "_numeric", -1),
    ScalarType.TEXT_ARRAY: PgType(1009, "_text", -1),
    ScalarType.BPCHAR_ARRAY: PgType(1014, "_bpchar", -1),
    ScalarType.BYTEA_ARRAY: PgType(1001, "_bytea", -1),
    ScalarType.DATE_ARRAY: PgType(1182, "_date", -1),
    ScalarType.TIMESTAMP_ARRAY: PgType(1115, "_timestamp", -1),
    ScalarType.TIMESTAMPTZ_ARRAY: PgType(1185, "_timestamptz", -1),
    ScalarType.JSONB_ARRAY: PgType(3807, "_jsonb", -1),
    ScalarType.INTERVAL_ARRAY: PgType(1187, "_interval", -1),
    ScalarType.TIME_ARRAY: PgType(1183, "_time", -1),
    ScalarType.MAP_TEXT_ARRAY: PgType(1009, "_text", -1),
    # Lists: Materialize's `list` pseudo-type (OID 16384), values in text.
    **{st: PgType(16384, "list", -1) for st in ScalarType if st.is_list},
}

# Types PostgreSQL has not (Materialize's map and lists), sent as text and not in pg_type.
SENT_AS_TEXT = frozenset(
    {
        ScalarType.MAP_TEXT_ARRAY,
        *(st for st in ScalarType if st.is_list or st.is_map),
    }
)

# OIDs a client may name for a parameter, mapped back to our types (varchar,
# bpchar, name and json read as text / jsonb; unknown (705) and 0 stay None).
# Array types are output only (no array parameters yet).
TYPES_BY_OID: dict[int, ScalarType] = {
    t.oid: s for s, t in PG_TYPES.items() if not s.is_array and s not in SENT_AS_TEXT
}
TYPES_BY_OID.update({1043: ScalarType.TEXT, 1042: ScalarType.TEXT, 19: ScalarType.TEXT})
TYPES_BY_OID.update({114: ScalarType.JSONB})


def pg_type(scalar_type: ScalarType) -> PgType:
    return PG_TYPES[scalar_type]


# ---------------------------------------------------------------------------
# Value encoding. Pure functions: pgwire uses them for DataRow / CopyData and
# the HTTP API for its JSON, so both print a value exactly as PostgreSQL does.
# ---------------------------------------------------------------------------

_PG_EPOCH_DATE = dt.date(2000, 1, 1)
_PG_EPOCH = dt.datetime(2000, 1, 1)
_ONE_MICROSECOND = dt.timedelta(microseconds=1)
_INT64_MAX = 2**63 - 1
_INT32_MAX = 2**31 - 1

# Binary numeric sign words (PostgreSQL's numeric.c).
_NUMERIC_POS = 0x0000
_NUMERIC_NEG = 0x4000
_NUMERIC_NAN = 0xC000
_NUMERIC_PINF = 0xD000
_NUMERIC_NINF = 0xF000


class InvalidEncoding(ValueError):
    """A parameter's bytes are not UTF-8 text without NUL: PostgreSQL's 22021
    in either format (it checks the encoding before any input function)."""


class UnsupportedFormat(ValueError):
    """A binary value of a type we cannot read (feature_not_supported, not
    a malformed value)."""


def _to_float4(value: float) -> float:
    return struct.unpack(">f", struct.pack(">f", value))[0]


def _neighbours(value: float, single: bool) -> tuple[float, float]:
    """The floats just below and above `value` (> 0) in its precision."""
    if not single:
        return math.nextafter(value, 0.0), math.nextafter(value, math.inf)
    (bits,) = struct.unpack(">I", struct.pack(">f", value))
    below, above = (struct.unpack(">f", struct.pack(">I", b))[0] for b in (bits - 1, bits + 1))
    return below, above


def _is_midpoint(digits: int, exponent: int, value: float, single: bool) -> bool:
    """Whether digits * 10**exponent lies exactly halfway between `value` and
    a neighbouring float (cheap tests first: such a tie is a dyadic rational,
    and an integer one needs floats more than 1 apart)."""
    if exponent < 0 and digits % 5**-exponent:
        return False
    if exponent >= 0 and value < (2**24 if single else 2**53):
        return False
    candidate = Fraction(digits) * Fraction(10) ** exponent
    exact = Fraction(value)
    return any(
        math.isfinite(n) and candidate == (exact + Fraction(n)) / 2
        for n in _neighbours(value, single)
    )


def _reads_back(digits: int, scale: int, value: float, single: bool) -> bool:
    """Whether digits * 10**scale parses back to exactly `value`."""
    parsed = float(f"{digits}e{scale}")
    try:
        return (_to_float4(parsed) if single else parsed) == value
    except OverflowError:  # past the largest float4
        return False


def _shortest_digits(value: float, single: bool) -> tuple[str, int]:
    """The fewest decimal digits that read back as `value` (> 0) and the
    exponent of the first one, as PostgreSQL's ryu-based output picks them
    (checked against PostgreSQL 15 on random bit patterns): never a decimal
    exactly halfway between two floats, and next to a power of two (where
    the interval is lopsided) maybe not the correctly rounded one."""
    if not single:
        # repr is the closest of the shortest decimals (ties allowed): use it
        # unless it is a tie; nothing shorter can do either way.
        _, digit_tuple, exponent = decimal.Decimal(repr(value)).as_tuple()
        assert isinstance(exponent, int)
        shortest = int("".join(map(str, digit_tuple)))
        if not _is_midpoint(shortest, exponent, value, single):
            text = str(shortest).rstrip("0") or "0"
            return text, exponent + len(digit_tuple) - 1
        lo, hi = len(digit_tuple) - 1, 16
    else:
        lo, hi = 0, 8
    # The least precision with a candidate (more digits never hurt): bisect.
    while lo < hi:
        middle = (lo + hi) // 2
        if _candidate(value, middle, single) is None:
            lo = middle + 1
        else:
            hi = middle
    found = _candidate(value, lo, single)
    if found is None:  # 17 (float4: 9) digits always identify a float
        raise AssertionError(f"no decimal form found for {value!r}")
    return found


def _candidate(value: float, precision: int, single: bool) -> tuple[str, int] | None:
    """The decimal with precision + 1 digits that ryu would print, if any:
    the correctly rounded one, else its neighbour in the last digit."""
    mantissa, _, exp = f"{value:.{precision}e}".partition("e")
    rounded = int(mantissa.replace(".", ""))
    scale = int(exp) - precision
    for digits in (rounded, rounded + 1, rounded - 1):
        if (
            digits > 0
            and _reads_back(digits, scale, value, single)
            and not _is_midpoint(digits, scale, value, single)
        ):
            text = str(digits)
            return text.rstrip("0") or "0", scale + len(text) - 1
    return None


def format_float(value: float, single: bool = False) -> str:
    """float4/float8 text as PostgreSQL 12+ prints it (extra_float_digits=1):
    shortest exact digits, fixed notation for exponents in [-4, 15) (float4:
    [-4, 6)), else `d.ddde+XX`; `Infinity`, `-Infinity`, `NaN`."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    if single:
        value = _to_float4(value)
    sign = "-" if value < 0 else ""
    digits, exp = _shortest_digits(abs(value), single)
    if -4 <= exp < (6 if single else 15):
        if exp >= len(digits) - 1:
            body = digits + "0" * (exp - len(digits) + 1)
        elif exp >= 0:
            body = f"{digits[: exp + 1]}.{digits[exp + 1 :]}"
        else:
            body = "0." + "0" * (-exp - 1) + digits
    else:
        mantissa = digits[0] + (f".{digits[1:]}" if len(digits) > 1 else "")
        body = f"{mantissa}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
    return sign + body


def format_numeric(value: decimal.Decimal | int | float) -> str:
    """numeric text: plain digits (never an exponent), no trailing zeros."""
    if isinstance(value, bool):
        raise TypeError("numeric value expected, got bool")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        value = decimal.Decimal(repr(value))
    if value.is_nan():
        return "NaN"
    if value.is_infinite():
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_zero():
        value = value.copy_abs()
    return format(numeric_display(value), "f")


def _as_utc_naive(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def format_timestamp(value: dt.datetime, with_zone: bool = False) -> str:
    """`YYYY-MM-DD HH:MM:SS[.ffffff]` (trailing zeros of the fraction dropped,
    as PostgreSQL does); timestamptz in UTC with `+00`."""
    value = _as_utc_naive(value)
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.year < 1000:  # strftime's %Y does not pad on every platform
        text = f"{value.year:04d}{text[text.index('-') :]}"
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    return text + "+00" if with_zone else text


def _format_jsonb(value: Any) -> str:
    if isinstance(value, str):
        return value  # already canonical JSON text
    return json.dumps(value, ensure_ascii=False)


def _format_bytea(value: Any) -> str:
    return "\\x" + bytes(value).hex()


def _format_date(value: dt.date) -> str:
    if isinstance(value, dt.datetime):
        value = value.date()
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"


_TEXT_ENCODERS: dict[ScalarType, Callable[[Any], str]] = {
    ScalarType.BOOLEAN: lambda v: "t" if v else "f",
    ScalarType.SMALLINT: lambda v: str(int(v)),
    ScalarType.INTEGER: lambda v: str(int(v)),
    ScalarType.BIGINT: lambda v: str(int(v)),
    ScalarType.REAL: lambda v: format_float(float(v), single=True),
    ScalarType.DOUBLE: lambda v: format_float(float(v)),
    ScalarType.NUMERIC: format_numeric,
    ScalarType.TEXT: str,
    ScalarType.BPCHAR: str,
    ScalarType.BYTEA: _format_bytea,
    ScalarType.DATE: _format_date,
    ScalarType.TIMESTAMP: format_timestamp,
    ScalarType.TIMESTAMPTZ: lambda v: format_timestamp(v, with_zone=True),
    ScalarType.JSONB: _format_jsonb,
    ScalarType.INTERVAL: format_interval,
    ScalarType.TIME: format_time,
    **{
        st: functools.partial(format_map, value_type=st.map_value)
        for st in ScalarType
        if st.map_value
    },
}


def _map_to_binary(value: str, value_type: ScalarType) -> bytes:
    return format_map(value, value_type).encode()


def encode_text(value: Any, scalar_type: ScalarType) -> str | None:
    """A value in PostgreSQL's text output format (None stays None: SQL NULL)."""
    if value is None:
        return None
    element = scalar_type.element
    if element is not None:  # `{1,2,NULL}`, elements quoted as PostgreSQL does
        return array_text(value, _TEXT_ENCODERS[element], scalar_type.is_list)
    return _TEXT_ENCODERS[scalar_type](value)


def _numeric_to_binary(value: decimal.Decimal | int | float) -> bytes:
    """numeric_send: ndigits, weight, sign, dscale, then base-10000 digits."""
    if isinstance(value, (int, float)):
        value = decimal.Decimal(value if isinstance(value, int) else repr(value))
    if value.is_nan():
        return struct.pack(">hhHH", 0, 0, _NUMERIC_NAN, 0)
    if value.is_infinite():
        return struct.pack(">hhHH", 0, 0, _NUMERIC_PINF if value > 0 else _NUMERIC_NINF, 0)
    sign, digit_tuple, exponent = numeric_display(value).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    if exponent > 0:
        digits += "0" * exponent
        exponent = 0
    scale = -exponent
    if len(digits) <= scale:
        digits = digits.zfill(scale + 1)
    int_part, frac_part = digits[: len(digits) - scale], digits[len(digits) - scale :]
    int_part = int_part.zfill(-(-len(int_part) // 4) * 4)
    frac_part = frac_part.ljust(-(-len(frac_part) // 4) * 4, "0")
    groups = [int(int_part[i : i + 4]) for i in range(0, len(int_part), 4)]
    weight = len(groups) - 1
    groups += [int(frac_part[i : i + 4]) for i in range(0, len(frac_part), 4)]
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight, sign = 0, 0
    word = _NUMERIC_NEG if sign else _NUMERIC_POS
    return struct.pack(f">hhHH{len(groups)}h", len(groups), weight, word, scale, *groups)


def _timestamp_to_binary(value: dt.datetime) -> bytes:
    return struct.pack(">q", (_as_utc_naive(value) - _PG_EPOCH) // _ONE_MICROSECOND)


def _date_to_binary(value: dt.date) -> bytes:
    if isinstance(value, dt.datetime):
        value = value.date()
    return struct.pack(">i", (value - _PG_EPOCH_DATE).days)


_BINARY_ENCODERS: dict[ScalarType, Callable[[Any], bytes]] = {
    ScalarType.BOOLEAN: lambda v: b"\x01" if v else b"\x00",
    ScalarType.SMALLINT: lambda v: struct.pack(">h", v),
    ScalarType.INTEGER: lambda v: struct.pack(">i", v),
    ScalarType.BIGINT: lambda v: struct.pack(">q", v),
    ScalarType.REAL: lambda v: struct.pack(">f", v),
    ScalarType.DOUBLE: lambda v: struct.pack(">d", v),
    ScalarType.NUMERIC: _numeric_to_binary,
    ScalarType.TEXT: lambda v: str(v).encode(),
    ScalarType.BPCHAR: lambda v: str(v).encode(),
    ScalarType.BYTEA: bytes,
    ScalarType.DATE: _date_to_binary,
    ScalarType.TIMESTAMP: _timestamp_to_binary,
    ScalarType.TIMESTAMPTZ: _timestamp_to_binary,
    ScalarType.JSONB: lambda v: b"\x01" + _format_jsonb(v).encode(),
    ScalarType.INTERVAL: lambda v: struct.pack(">qii", v.micros, v.days, v.months),
    ScalarType.TIME: lambda v: struct.pack(">q", time_micros(v)),
    **{
        st: functools.partial(_map_to_binary, value_type=st.map_value)
        for st in ScalarType
        if st.map_value
    },
}


def encode_binary(value: Any, scalar_type: ScalarType) -> bytes | None:
    """A value in PostgreSQL's binary (`typsend`) format (None: SQL NULL)."""
    if value is None:
        return None
    if scalar_type.is_list:  # no binary form (Materialize's neither): its text
        return str(encode_text(value, scalar_type)).encode()
    element = scalar_type.element
    if element is not None:
        return _array_to_binary(value, element)
    return _BINARY_ENCODERS[scalar_type](value)


def _array_to_binary(values: tuple, element: ScalarType) -> bytes:
    """array_send: ndim, has-NULLs flag, element OID, (length, lower bound 1)
    per dimension, then each element as (length or -1, bytes); an empty
    array has no dimensions."""
    oid = PG_TYPES[element].oid
    if not values:
        return struct.pack(">iii", 0, 0, oid)
    has_null = any(v is None for v in values)
    parts = [struct.pack(">iiiii", 1, int(has_null), oid, len(values), 1)]
    for value in values:
        if value is None:
            parts.append(struct.pack(">i", -1))
        else:
            data = _BINARY_ENCODERS[element](value)
            parts.append(struct.pack(">i", len(data)) + data)
    return b"".join(parts)


# ---------------------------------------------------------------------------
# Parameter decoding: Bind's values arrive as text or binary; the coordinator
# takes every parameter as text, so binary ones are turned into their text form.
# ---------------------------------------------------------------------------


def _unpack(fmt: str, data: bytes) -> Any:
    if len(data) != struct.calcsize(fmt):
        raise ValueError(f"expected {struct.calcsize(fmt)} bytes, got {len(data)}")
    return struct.unpack(fmt, data)[0]


def _numeric_from_binary(data: bytes) -> str:
    if len(data) < 8:
        raise ValueError("numeric value too short")
    ndigits, weight, sign, dscale = struct.unpack(">hhHH", data[:8])
    if ndigits < 0 or len(data) != 8 + 2 * ndigits:
        raise ValueError("numeric digit count does not match the data")
    special = {_NUMERIC_NAN: "NaN", _NUMERIC_PINF: "Infinity", _NUMERIC_NINF: "-Infinity"}
    if sign in special:
        return special[sign]
    if sign not in (_NUMERIC_POS, _NUMERIC_NEG) or dscale > 0x3FFF:
        raise ValueError("invalid sign or scale in numeric value")
    groups = struct.unpack(f">{ndigits}h", data[8:])
    if any(not 0 <= g < 10000 for g in groups):
        raise ValueError("invalid digit in numeric value")
    coefficient = int("".join(f"{g:04d}" for g in groups) or "0")
    precision = 4 * (ndigits + max(weight + 1, 0)) + dscale + 8
    context = decimal.Context(prec=precision, Emax=10**9, Emin=-(10**9))
    value = context.scaleb(decimal.Decimal(coefficient), 4 * (weight - ndigits + 1))
    value = context.quantize(value, context.scaleb(decimal.Decimal(1), -dscale))
    return format_numeric(-value if sign == _NUMERIC_NEG and coefficient else value)


def _timestamp_from_binary(data: bytes, with_zone: bool) -> str:
    micros = _unpack(">q", data)
    if micros == _INT64_MAX:
        return "infinity"
    if micros == -_INT64_MAX - 1:
        return "-infinity"
    try:
        value = _PG_EPOCH + dt.timedelta(microseconds=micros)
    except OverflowError:
        raise ValueError("timestamp out of range") from None
    return format_timestamp(value, with_zone)


def _date_from_binary(data: bytes) -> str:
    days = _unpack(">i", data)
    if days == _INT32_MAX:
        return "infinity"
    if days == -_INT32_MAX - 1:
        return "-infinity"
    try:
        return _format_date(_PG_EPOCH_DATE + dt.timedelta(days=days))
    except OverflowError:
        raise ValueError("date out of range") from None


def _jsonb_from_binary(data: bytes) -> str:
    if not data or data[0] != 1:
        raise ValueError("unsupported jsonb version number")
    return data[1:].decode()


def _interval_from_binary(data: bytes) -> str:
    if len(data) != 16:
        raise ValueError(f"expected 16 bytes, got {len(data)}")
    micros, days, months = struct.unpack(">qii", data)
    return format_interval(Interval(months, days, micros))


def _time_from_binary(data: bytes) -> str:
    micros = _unpack(">q", data)
    if not 0 <= micros < DAY_MICROS:
        raise ValueError("time out of range")
    return format_time(time_from_micros(micros))


def _bool_from_binary(data: bytes) -> str:
    if data not in (b"\x00", b"\x01"):
        raise ValueError("invalid boolean value")
    return "t" if data == b"\x01" else "f"


_BINARY_DECODERS: dict[ScalarType, Callable[[bytes], str]] = {
    ScalarType.BOOLEAN: _bool_from_binary,
    ScalarType.SMALLINT: lambda d: str(_unpack(">h", d)),
    ScalarType.INTEGER: lambda d: str(_unpack(">i", d)),
    ScalarType.BIGINT: lambda d: str(_unpack(">q", d)),
    ScalarType.REAL: lambda d: format_float(_unpack(">f", d), single=True),
    ScalarType.DOUBLE: lambda d: format_float(_unpack(">d", d)),
    ScalarType.NUMERIC: _numeric_from_binary,
    ScalarType.TEXT: lambda d: d.decode(),
    ScalarType.BPCHAR: lambda d: d.decode(),
    ScalarType.BYTEA: lambda d: "\\x" + d.hex(),
    ScalarType.DATE: _date_from_binary,
    ScalarType.TIMESTAMP: lambda d: _timestamp_from_binary(d, with_zone=False),
    ScalarType.TIMESTAMPTZ: lambda d: _timestamp_from_binary(d, with_zone=True),
    ScalarType.JSONB: _jsonb_from_binary,
    ScalarType.INTERVAL: _interval_from_binary,
    ScalarType.TIME: _time_from_binary,
}

# OIDs whose binary form is plain UTF-8 text although they are not in TYPES_BY_OID
# as text: json (114) has no version byte; unknown (705) is what libpq sends untyped.
_TEXT_LIKE_OIDS = {114, 705}


def decode_param(data: bytes | None, format_code: int, oid: int) -> str | None:
    """A Bind parameter in text form. `format_code` 0 (text) or 1 (binary);
    `oid` is the parameter's type (needed for binary only). Raises
    UnsupportedFormat for a binary value of a type we cannot read and
    ValueError for a malformed value."""
    if data is None:
        return None
    try:
        if format_code == 0:
            text = data.decode()
        elif format_code == 1:
            if oid in _TEXT_LIKE_OIDS:
                text = data.decode()
            elif oid in TYPES_BY_OID:
                text = _BINARY_DECODERS[TYPES_BY_OID[oid]](data)
            else:
                raise UnsupportedFormat(f"binary format for type oid {oid} is not supported")
        else:
            raise UnsupportedFormat(f"unsupported format code: {format_code}")
    except UnicodeDecodeError as error:
        bad = error.object[error.start : error.end]
        raise InvalidEncoding(invalid_byte_sequence(bad)) from None
    if "\x00" in text:
        raise InvalidEncoding(invalid_byte_sequence(b"\x00"))
    return text
