"""PostgreSQL's input functions for Tidemark's scalar types: the value a
string denotes as a type (`'12'::int`, `'{1,2}'::int[]`, `'2024-01-01'::date`).

The plan language's, below sql/ (which folds casts of constants at plan
time, sql/coercion.py) and compute/ (which casts text in steps): both read
values alike. Errors carry PostgreSQL's SQLSTATE in `code`; each layer turns
them into its own error type."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re
from typing import Any

from coordinator_lib.expr.datetime_input import DatetimeOutOfRange, parse_date, parse_datetime
from coordinator_lib.expr.scalar import is_integer
from coordinator_lib.repr.bytea import parse_bytea_escape
from coordinator_lib.repr.interval import IntervalFieldOverflow, parse_interval
from coordinator_lib.repr.jsonb import canonical_jsonb
from coordinator_lib.repr.numeric import NumericFieldOverflow, to_numeric
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.repr.text_map import MapSyntaxError, entry_text, map_value, parse_map_entries
from coordinator_lib.repr.time_of_day import TimeOutOfRange, parse_time

S = ScalarType


class TextInputError(ValueError):
    """A string that is not a value of the type: 22P02 (invalid text
    representation), 22003 (out of range) or 22007 (bad date/time)."""

    def __init__(self, message: str, code: str = "22P02", detail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.detail = detail

    @classmethod
    def out_of_range(cls, message: str, detail: str | None = None) -> TextInputError:
        return cls(message, "22003", detail)

    @classmethod
    def bad_datetime(cls, message: str) -> TextInputError:
        return cls(message, "22007")


def _stored_numeric(value: decimal.Decimal) -> decimal.Decimal:
    """`value` in numeric's bound (repr/numeric.py), overflow as 22003."""
    try:
        return to_numeric(value)
    except NumericFieldOverflow as error:
        raise TextInputError.out_of_range(error.message, error.detail) from None


INT_RANGES = {
    S.SMALLINT: (-(2**15), 2**15 - 1),
    S.INTEGER: (-(2**31), 2**31 - 1),
    S.BIGINT: (-(2**63), 2**63 - 1),
}
REAL_MAX = 3.4028234663852886e38
REAL_MIN = 7e-46  # below half of real's smallest subnormal (1.4e-45) rounds to zero

_INT_RE = re.compile(r"^\s*[+-]?\d+\s*$")
_TRUE = {"t", "tr", "tru", "true", "y", "ye", "yes", "on", "1"}
_FALSE = {"f", "fa", "fal", "fals", "false", "n", "no", "off", "of", "0"}


ONE_DIMENSION = "Tidemark's arrays are one-dimensional (a type's dimensions, int[][], are ignored)"
_ARRAY_ITEM = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^,{}"]*?))\s*(,|$)')


def _parse_array(text: str, element: ScalarType, kind: str = "array") -> tuple[Any, ...]:
    """A one-dimensional array (or list) literal, `{1,2,NULL}` or `{"a b",c}`."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise TextInputError(f'malformed {kind} literal: "{text}"')
    inner, values, at = body[1:-1], [], 0
    if kind == "array" and inner.lstrip().startswith("{"):  # `{{1,2},{3,4}}`
        raise TextInputError(
            "multidimensional arrays are not supported",
            "0A000",
            ONE_DIMENSION,
        )
    while inner.strip() and at <= len(inner):
        match = _ARRAY_ITEM.match(inner, at)
        if match is None or match.end() == at:
            raise TextInputError(f'malformed {kind} literal: "{text}"')
        quoted, bare, comma = match.groups()
        if quoted is not None:
            values.append(parse_text_as(re.sub(r"\\(.)", r"\1", quoted), element))
        elif bare.upper() == "NULL":
            values.append(None)
        else:
            values.append(parse_text_as(bare, element))
        at = match.end() if comma else len(inner) + 1
    return tuple(values)


def parse_text_as(text: str, st: ScalarType) -> Any:
    """The value an untyped string literal denotes as type `st` (PostgreSQL's
    input function for the type). Raises the SQLSTATE PostgreSQL raises."""
    if st in (S.TEXT, S.BPCHAR):
        return text
    if st.element is not None:
        return _parse_array(text, st.element, "list" if st.is_list else "array")
    stripped = text.strip()
    if st is S.BOOLEAN:
        word = stripped.lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise TextInputError(f'invalid input syntax for type boolean: "{text}"')
    if is_integer(st):
        if not _INT_RE.match(text):
            raise TextInputError(f'invalid input syntax for type {st.value}: "{text}"')
        integer = int(stripped)
        low, high = INT_RANGES[st]
        if not low <= integer <= high:
            raise TextInputError.out_of_range(f'value "{text}" is out of range for type {st.value}')
        return integer
    if st is S.NUMERIC:
        exact: decimal.Decimal | None
        try:
            exact = decimal.Decimal(stripped)
        except decimal.InvalidOperation:
            exact = None
        if exact is None:
            raise TextInputError(f'invalid input syntax for type numeric: "{text}"')
        if not exact.is_finite():
            # numeric is decimal(38, 10) on both engines: all of its encodings
            # are numbers, so NaN has none (docs/slt.md).
            raise TextInputError(
                f'invalid input syntax for type numeric: "{text}"',
                detail="Tidemark's numeric has no NaN or infinity;"
                " double precision has them ('NaN'::float8).",
            )
        return _stored_numeric(exact)
    if st in (S.REAL, S.DOUBLE):
        try:
            number = float(stripped)
        except ValueError:
            raise TextInputError(f'invalid input syntax for type {st.value}: "{text}"') from None
        smallest = REAL_MIN if st is S.REAL else 0.0
        spelled_infinite = "inf" in stripped.lower()
        overflow = math.isinf(number) and not spelled_infinite
        overflow |= st is S.REAL and math.isfinite(number) and abs(number) > REAL_MAX
        underflow = abs(number) <= smallest or number == 0
        underflow &= re.search(r"[1-9]", stripped.lower().split("e")[0]) is not None
        if overflow or underflow:
            raise TextInputError.out_of_range(f'"{text}" is out of range for type {st.value}')
        return number
    if st is S.BYTEA:
        return _parse_bytea(text)
    if st in (S.DATE, S.TIMESTAMP, S.TIMESTAMPTZ):
        try:
            if st is S.DATE:
                return parse_date(text)
            moment = parse_datetime(text)
        except DatetimeOutOfRange as error:
            message = str(error) if error.code == "22023" else f'{error}: "{text}"'
            raise TextInputError(message, error.code) from None
        except ValueError:
            raise TextInputError.bad_datetime(
                f'invalid input syntax for type {st.value}: "{text}"'
            ) from None
        if st is S.TIMESTAMP:
            return moment.replace(tzinfo=None)
        if moment.tzinfo is None:  # the session time zone is UTC
            return moment.replace(tzinfo=dt.UTC)
        return moment.astimezone(dt.UTC)
    if st is S.TIME:
        try:
            return parse_time(text)
        except TimeOutOfRange as error:
            raise TextInputError(str(error), "22008") from None
        except ValueError as error:
            raise TextInputError.bad_datetime(str(error)) from None
    if st is S.INTERVAL:
        try:
            return parse_interval(text)
        except IntervalFieldOverflow as error:
            raise TextInputError(str(error), "22015") from None
        except ValueError as error:
            raise TextInputError.bad_datetime(str(error)) from None
    value_type = st.map_value
    if value_type is not None:  # each value read by its own type's input
        try:
            entries = parse_map_entries(text, nested=value_type.is_map)
        except MapSyntaxError as error:
            raise TextInputError(str(error)) from None
        read = {k: None if v is None else parse_text_as(v, value_type) for k, v in entries.items()}
        return map_value(
            {k: None if v is None else entry_text(v, value_type) for k, v in read.items()}
        )
    if st is S.JSONB:
        try:
            return canonical_jsonb(json.loads(text))
        except ValueError:
            raise TextInputError(f'invalid input syntax for type json: "{text}"') from None
    unsupported = f"literals of type {st.value} are not supported"
    raise TextInputError(unsupported, "0A000")  # pragma: no cover


def _parse_bytea(text: str) -> bytes:
    if text.startswith("\\x"):
        try:
            return bytes.fromhex(text[2:])
        except ValueError:
            raise TextInputError(f'invalid hexadecimal data: "{text}"') from None
    try:
        return parse_bytea_escape(text)
    except ValueError:
        raise TextInputError(f'invalid input syntax for type bytea: "{text}"') from None
