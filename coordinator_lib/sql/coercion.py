"""PostgreSQL's type rules, as plain functions over ScalarType.

- which SQL type names map to which ScalarType;
- which casts exist and at which level (implicit < assignment < explicit),
  after PostgreSQL's `pg_cast`;
- the common type of CASE / COALESCE / UNION branches (`select_common_type`)
  and of a binary operator's operands (operator resolution, which differs:
  `numeric + real` is `double precision` but CASE of numeric and real is
  `real`);
- how an untyped string literal reads as a given type (PostgreSQL's
  "unknown" literals: `date_col = '2024-01-01'` compares dates);
- casting literal values at plan time where the result is exact;
- interval strings ('1h', '500ms') for RETAIN HISTORY and TICK INTERVAL.

Errors raised here carry no position; the binder adds it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
from typing import Any

from sqlglot import exp

from coordinator_lib.expr.scalar import NUMERIC_RANK, is_integer, is_numeric
from coordinator_lib.expr.text_input import INT_RANGES, REAL_MAX, TextInputError
from coordinator_lib.expr.text_input import parse_text_as as _parse_text_as
from coordinator_lib.repr.interval import QUALIFIERS
from coordinator_lib.repr.numeric import NumericFieldOverflow, numeric_display, to_numeric
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.errors import (
    DatetimeFieldOverflow,
    InvalidDatetimeFormat,
    InvalidParameter,
    InvalidTextRepresentation,
    InvalidTimeZoneDisplacement,
    NumericValueOutOfRange,
    ParseError,
    SqlError,
    UnknownType,
    UnsupportedFeature,
)

S = ScalarType

# PostgreSQL's internal type names: what `SELECT 1::int` calls its column.
INTERNAL_NAMES = {
    S.BOOLEAN: "bool",
    S.SMALLINT: "int2",
    S.INTEGER: "int4",
    S.BIGINT: "int8",
    S.REAL: "float4",
    S.DOUBLE: "float8",
    S.NUMERIC: "numeric",
    S.TEXT: "text",
    S.BPCHAR: "bpchar",
    S.BYTEA: "bytea",
    S.DATE: "date",
    S.TIMESTAMP: "timestamp",
    S.TIMESTAMPTZ: "timestamptz",
    S.JSONB: "jsonb",
    S.INTERVAL: "interval",
    S.TIME: "time",
    **{st: "map" for st in S if st.is_map},
}

_DTYPES: dict[exp.DType, ScalarType] = {
    exp.DType.BOOLEAN: S.BOOLEAN,
    exp.DType.SMALLINT: S.SMALLINT,
    exp.DType.INT: S.INTEGER,
    exp.DType.BIGINT: S.BIGINT,
    exp.DType.FLOAT: S.REAL,
    exp.DType.DOUBLE: S.DOUBLE,
    exp.DType.DECIMAL: S.NUMERIC,
    exp.DType.TEXT: S.TEXT,
    exp.DType.VARCHAR: S.TEXT,
    exp.DType.NVARCHAR: S.TEXT,
    exp.DType.CHAR: S.BPCHAR,
    exp.DType.NCHAR: S.BPCHAR,
    exp.DType.BPCHAR: S.BPCHAR,
    exp.DType.VARBINARY: S.BYTEA,
    exp.DType.DATE: S.DATE,
    exp.DType.TIMESTAMP: S.TIMESTAMP,
    exp.DType.TIMESTAMPTZ: S.TIMESTAMPTZ,
    exp.DType.JSONB: S.JSONB,
    exp.DType.JSON: S.JSONB,
    exp.DType.INTERVAL: S.INTERVAL,
    exp.DType.TIME: S.TIME,
}


def scalar_type_of(data_type: exp.DataType) -> ScalarType:
    """The ScalarType for a parsed SQL type. Length/precision modifiers are
    checked (`type_length`) but not kept in the scalar type (`varchar(10)` is
    text, `numeric(10,2)` is numeric): a cast applies them (sql/scalar.py), a
    column keeps a length in its ColumnType (sql/typmod.py)."""
    kind = data_type.this
    if kind in _DTYPES:
        type_length(data_type)
        return _DTYPES[kind]
    if isinstance(kind, exp.Interval):  # `interval hour`: fields, `interval_typmod`
        return S.INTERVAL
    if kind is exp.DType.ARRAY and len(data_type.expressions) == 1:  # `integer[]`
        element = data_type.expressions[0]
        # `integer[][]` and `integer[3][4]` are `integer[]` (PostgreSQL and
        # Materialize ignore the dimensions a type names)
        while (
            isinstance(element, exp.DataType)
            and element.this is exp.DType.ARRAY
            and len(element.expressions) == 1
        ):
            element = element.expressions[0]
        if isinstance(element, exp.DataType) and element.this is not exp.DType.ARRAY:
            return scalar_type_of(element).array()
    if kind is exp.DType.LIST and len(data_type.expressions) == 1:  # `int list`
        element = data_type.expressions[0]
        if isinstance(element, exp.DataType) and element.this is not exp.DType.LIST:
            return scalar_type_of(element).list()
        raise UnsupportedFeature("lists of lists are not supported")
    if kind is exp.DType.MAP and len(data_type.expressions) == 2:  # `map[text=>T]`
        key, value = (scalar_type_of(t) for t in data_type.expressions)
        if key is not S.TEXT:
            raise UnsupportedFeature(f"map keys of type {key.value} are not supported")
        try:
            return value.map_of()
        except ValueError:
            raise UnsupportedFeature(
                f"map[text=>{value.value}] is not supported (Tidemark's maps hold values of"
                f" {', '.join(st.map_value.value for st in S if st.map_value)})"
            ) from None
    if kind is exp.DType.USERDEFINED:
        raise UnknownType(f'type "{data_type.args["kind"].name}" does not exist')
    name = data_type.sql(dialect="postgres").lower()
    raise UnsupportedFeature(f"type {name} is not supported")


VARCHAR_MAX_LENGTH = 10_485_760


_LENGTH_TYPES = {
    exp.DType.VARCHAR: "character varying",
    exp.DType.NVARCHAR: "character varying",
    exp.DType.CHAR: "character",
    exp.DType.NCHAR: "character",
    exp.DType.BPCHAR: "character",
}


def type_length(data_type: exp.DataType) -> int | None:
    """The `n` of `varchar(n)` / `char(n)` (1 to 10485760, as in Materialize
    and PostgreSQL); `char` alone is char(1), as in SQL; None when not given
    (varchar, bpchar: any length) or for other types."""
    name = _LENGTH_TYPES.get(data_type.this)
    if name is None:
        return None
    params = data_type.expressions
    if not params:
        return 1 if data_type.this in (exp.DType.CHAR, exp.DType.NCHAR) else None
    if len(params) != 1 or not isinstance(params[0].this, exp.Literal):
        return None
    length = int(params[0].this.this)
    if not 1 <= length <= VARCHAR_MAX_LENGTH:
        raise InvalidParameter(f"length for type {name} must be between 1 and {VARCHAR_MAX_LENGTH}")
    return length


def declared_type(data_type: exp.DataType, nullable: bool = True) -> ColumnType:
    """A column's type as declared: its scalar type, `varchar(n)` /
    `char(n)`'s length, whether text was declared varchar, and an interval's
    qualifier and precision."""
    varchar = data_type.this in (exp.DType.VARCHAR, exp.DType.NVARCHAR)
    scalar = scalar_type_of(data_type)
    return ColumnType(scalar, nullable, type_length(data_type), varchar, interval_typmod(data_type))


def interval_typmod(data_type: exp.DataType) -> tuple[str, int] | None:
    """The qualifier (`HOUR`, `DAY TO SECOND`; "" for none) and seconds
    precision (6 for none) of `interval <fields>(p)`, or None for a plain
    interval or another type."""
    kind, params = data_type.this, data_type.expressions
    fields = kind.args["unit"].sql().upper() if isinstance(kind, exp.Interval) else ""
    if not fields and not (kind is exp.DType.INTERVAL and params):
        return None
    if fields and fields not in QUALIFIERS:
        raise ParseError(f"invalid interval qualifier {fields}")
    precision = 6
    if params:
        digits = params[0].this
        if len(params) != 1 or not isinstance(digits, exp.Literal) or digits.is_string:
            raise InvalidParameter("INTERVAL precision must be an integer")
        precision = int(digits.this)
        if precision < 0:
            raise InvalidParameter(f"INTERVAL({precision}) precision must not be negative")
    return fields, min(precision, 6)


def timestamp_precision(data_type: exp.DataType) -> int | None:
    """The `p` of `timestamp(p)` / `timestamptz(p)` (at most 6, as PostgreSQL
    reduces it), None when not given or for other types."""
    if data_type.this not in (exp.DType.TIMESTAMP, exp.DType.TIMESTAMPTZ):
        return None
    params = data_type.expressions
    if len(params) != 1 or not isinstance(params[0].this, exp.Literal):
        return None
    precision = int(params[0].this.this)
    if precision < 0:
        raise InvalidParameter(f"TIMESTAMP({precision}) precision must not be negative")
    return min(precision, 6)


# --- casts ----------------------------------------------------------------------

_IMPLICIT: dict[ScalarType, set[ScalarType]] = {
    S.SMALLINT: {S.INTEGER, S.BIGINT, S.NUMERIC, S.REAL, S.DOUBLE},
    S.INTEGER: {S.BIGINT, S.NUMERIC, S.REAL, S.DOUBLE},
    S.BIGINT: {S.NUMERIC, S.REAL, S.DOUBLE},
    S.NUMERIC: {S.REAL, S.DOUBLE},
    S.REAL: {S.DOUBLE},
    S.DATE: {S.TIMESTAMP, S.TIMESTAMPTZ},
    S.TIMESTAMP: {S.TIMESTAMPTZ},
    S.TIME: {S.INTERVAL},
    S.BPCHAR: {S.TEXT},
}

_ASSIGNMENT: dict[ScalarType, set[ScalarType]] = {
    S.SMALLINT: set(),
    S.INTEGER: {S.SMALLINT},
    S.BIGINT: {S.SMALLINT, S.INTEGER},
    S.NUMERIC: {S.SMALLINT, S.INTEGER, S.BIGINT},
    S.REAL: {S.SMALLINT, S.INTEGER, S.BIGINT, S.NUMERIC},
    S.DOUBLE: {S.SMALLINT, S.INTEGER, S.BIGINT, S.NUMERIC, S.REAL},
    S.TIMESTAMP: {S.DATE, S.TIME},
    S.TIMESTAMPTZ: {S.DATE, S.TIMESTAMP, S.TIME},
    S.INTERVAL: {S.TIME},
}

_EXPLICIT: dict[ScalarType, set[ScalarType]] = {
    S.BOOLEAN: {S.INTEGER},
    S.INTEGER: {S.BOOLEAN},
    S.JSONB: {S.BOOLEAN, S.SMALLINT, S.INTEGER, S.BIGINT, S.NUMERIC, S.REAL, S.DOUBLE},
}


def can_cast_implicitly(src: ScalarType, dst: ScalarType) -> bool:
    return src is dst or dst in _IMPLICIT.get(src, set())


def can_assign(src: ScalarType, dst: ScalarType) -> bool:
    """Assignment casts (INSERT/UPDATE): implicit ones, narrowing numerics,
    dropping time precision, and anything to text or char."""
    return (
        can_cast_implicitly(src, dst)
        or dst in _ASSIGNMENT.get(src, set())
        or dst in (S.TEXT, S.BPCHAR)
    )


def can_cast_explicitly(src: ScalarType, dst: ScalarType) -> bool:
    """CAST / `::`. Text converts to and from everything (I/O conversion)."""
    return (
        can_assign(src, dst)
        or dst in _EXPLICIT.get(src, set())
        or src in (S.TEXT, S.BPCHAR)
        or _list_cast(src, dst)
        or (is_numeric(src) and is_numeric(dst))
    )


def _list_cast(src: ScalarType, dst: ScalarType) -> bool:
    """An array or list to a list whose elements it casts to (Materialize's),
    an array to an array whose elements it casts to (PostgreSQL's)."""
    if src.element is None or not (dst.is_list or (dst.is_array and src.is_array)):
        return False
    return can_cast_explicitly(src.element, dst.element)  # type: ignore[arg-type]


_CATEGORY = {
    S.BOOLEAN: "B",
    S.SMALLINT: "N",
    S.INTEGER: "N",
    S.BIGINT: "N",
    S.NUMERIC: "N",
    S.REAL: "N",
    S.DOUBLE: "N",
    S.TEXT: "S",
    S.BPCHAR: "S",
    S.BYTEA: "U",
    S.DATE: "D",
    S.TIMESTAMP: "D",
    S.TIMESTAMPTZ: "D",
    S.JSONB: "U",
    **{st: "U" for st in S if st.is_map},
    S.INTERVAL: "T",
    S.TIME: "D",
    # Arrays and lists compare only with the same array or list type.
    **{st: "A" for st in ScalarType if st.element is not None},
}
_PREFERRED = {S.DOUBLE, S.TIMESTAMPTZ, S.TEXT, S.BOOLEAN}


def common_type(types: list[ScalarType | None]) -> ScalarType | None:
    """PostgreSQL's `select_common_type` for CASE, COALESCE, UNION, VALUES:
    None entries are unknown literals (they take whatever is chosen; all
    unknown is text). Returns None when the types cannot be matched."""
    known = [t for t in types if t is not None]
    if not known:
        return S.TEXT
    candidate = known[0]
    for other in known[1:]:
        if other is candidate:
            continue
        if _CATEGORY[other] != _CATEGORY[candidate]:
            return None
        if (
            candidate not in _PREFERRED
            and can_cast_implicitly(candidate, other)
            and not can_cast_implicitly(other, candidate)
        ):
            candidate = other
    if all(can_cast_implicitly(t, candidate) for t in known):
        return candidate
    return None


def operator_type(left: ScalarType, right: ScalarType) -> ScalarType | None:
    """The type both operands of an arithmetic or comparison operator are cast
    to, following PostgreSQL's operator resolution: the wider integer or
    numeric, but double precision as soon as a float meets another type
    (`int + real` and `numeric + real` resolve to the float8 operators).
    None if no operator exists."""
    if left is right:
        return left
    if is_numeric(left) and is_numeric(right):
        if S.DOUBLE in (left, right) or S.REAL in (left, right):
            return S.DOUBLE
        return left if NUMERIC_RANK[left] >= NUMERIC_RANK[right] else right
    chosen = common_type([left, right])
    if chosen is not None and _CATEGORY[chosen] != "N":
        return chosen
    return None


# --- literals -------------------------------------------------------------------


def integer_literal_type(value: int) -> ScalarType:
    """PostgreSQL types an integer constant as int4 if it fits, else int8, else numeric."""
    for st in (S.INTEGER, S.BIGINT):
        low, high = INT_RANGES[st]
        if low <= value <= high:
            return st
    return S.NUMERIC


def number_literal(text: str) -> tuple[Any, ScalarType]:
    """Value and type of a numeric constant as written (`42`, `1.5`, `1e3`);
    a numeric one exact, not yet in numeric's bound (the binder decides)."""
    if re.fullmatch(r"\d+", text):
        value = int(text)
        st = integer_literal_type(value)
        return (value if st is not S.NUMERIC else decimal.Decimal(value)), st
    try:
        return decimal.Decimal(text), S.NUMERIC
    except decimal.InvalidOperation:
        raise InvalidTextRepresentation(f"invalid numeric literal {text!r}") from None


def stored_numeric(value: decimal.Decimal | int) -> decimal.Decimal:
    """`value` in numeric's bound (repr/numeric.py), overflow as 22003."""
    try:
        return to_numeric(value)
    except NumericFieldOverflow as error:
        raise NumericValueOutOfRange(error.message, detail=error.detail) from None


def check_int_range(value: int, st: ScalarType) -> int:
    low, high = INT_RANGES[st]
    if not low <= value <= high:
        raise NumericValueOutOfRange(f"{st.value} out of range: {value}")
    return value


_INPUT_ERRORS: dict[str, type[SqlError]] = {
    "22P02": InvalidTextRepresentation,
    "22003": NumericValueOutOfRange,
    "22007": InvalidDatetimeFormat,
    "22008": DatetimeFieldOverflow,
    "22009": InvalidTimeZoneDisplacement,
    "22023": InvalidParameter,
    "0A000": UnsupportedFeature,
}


def parse_text_as(text: str, st: ScalarType) -> Any:
    """The value an untyped string literal denotes as type `st` (PostgreSQL's
    input function for the type, expr/text_input.py), its errors as the
    planner's."""
    try:
        return _parse_text_as(text, st)
    except TextInputError as error:
        raise _INPUT_ERRORS[error.code](error.message, detail=error.detail) from None


class _NoFold:
    """Marker: the cast cannot be done exactly at plan time."""


NO_FOLD = _NoFold()


def fold_cast(value: Any, src: ScalarType, dst: ScalarType) -> Any:
    """`value` (of type `src`) cast to `dst` when that is exact and cheap to do
    at plan time (so INSERT ... VALUES stays a constant), else NO_FOLD.
    Out-of-range integers raise NumericValueOutOfRange like PostgreSQL."""
    if value is None or src is dst:
        return value
    if is_integer(src) and is_integer(dst):
        return check_int_range(value, dst)
    if is_integer(src) and dst is S.NUMERIC:
        return stored_numeric(value)
    if is_integer(src) and dst in (S.REAL, S.DOUBLE) and abs(value) < 2**53:
        return float(value)
    if src is S.NUMERIC and is_integer(dst):
        rounded = int(value.quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP))
        return check_int_range(rounded, dst)
    if src is S.NUMERIC and dst in (S.REAL, S.DOUBLE):
        number = float(value)
        if math.isinf(number) or (dst is S.REAL and abs(number) > REAL_MAX):
            raise NumericValueOutOfRange(f'"{value}" is out of range for type {dst.value}')
        return number
    if dst is S.TEXT and is_integer(src):
        return str(value)
    if dst is S.TEXT and src is S.NUMERIC:  # as compute prints it: no trailing zeros
        return format(numeric_display(value), "f")
    if src is S.DATE and dst is S.TIMESTAMP:
        return dt.datetime(value.year, value.month, value.day)
    if src is S.DATE and dst is S.TIMESTAMPTZ:
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC)
    if src is S.TIMESTAMP and dst is S.TIMESTAMPTZ:
        return value.replace(tzinfo=dt.UTC)
    return NO_FOLD


# --- intervals ------------------------------------------------------------------

_UNITS_MS = {
    "us": 0.001,
    "microsecond": 0.001,
    "microseconds": 0.001,
    "ms": 1,
    "millisecond": 1,
    "milliseconds": 1,
    "s": 1000,
    "sec": 1000,
    "secs": 1000,
    "second": 1000,
    "seconds": 1000,
    "m": 60_000,
    "min": 60_000,
    "mins": 60_000,
    "minute": 60_000,
    "minutes": 60_000,
    "h": 3_600_000,
    "hr": 3_600_000,
    "hrs": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
    "days": 86_400_000,
    "w": 604_800_000,
    "week": 604_800_000,
    "weeks": 604_800_000,
}
_INTERVAL_PART = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)")
_HMS = re.compile(r"^\s*(\d+):(\d{1,2})(?::(\d{1,2}(?:\.\d+)?))?\s*$")


def parse_interval_ms(text: str) -> int:
    """Milliseconds in an interval string: '1h', '1 hour 30 minutes', '500ms',
    '01:30:00', or a bare number of seconds (as PostgreSQL reads '10')."""
    match = _HMS.match(text)
    if match:
        hours, minutes, seconds = match.group(1), match.group(2), match.group(3) or "0"
        return round((int(hours) * 3600 + int(minutes) * 60 + float(seconds)) * 1000)
    total = 0.0
    pos = 0
    stripped = text.strip()
    if not stripped:
        raise InvalidParameter(f'invalid input syntax for type interval: "{text}"')
    while pos < len(stripped):
        part = _INTERVAL_PART.match(stripped, pos)
        if not part or part.end() == pos:
            raise InvalidParameter(f'invalid input syntax for type interval: "{text}"')
        unit = part.group(2).lower() or "s"
        if unit not in _UNITS_MS:
            raise InvalidParameter(f'invalid input syntax for type interval: "{text}"')
        total += float(part.group(1)) * _UNITS_MS[unit]
        pos = part.end()
        while pos < len(stripped) and stripped[pos] in " ,":
            pos += 1
    return round(total)
