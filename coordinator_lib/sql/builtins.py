"""Binding the built-in string, math and date/time functions with
PostgreSQL's overloads and result types (`expr/functions.py` lists them;
both engines implement each).

Each binder takes the ScalarBinder and the sqlglot node and returns a Typed
`CallFunction`. Argument types follow PostgreSQL's resolution: untyped
literals take the parameter's type; integers go to double precision where
only float and numeric overloads exist (round, ceil, floor, sqrt, power);
anything else that does not fit is "function ... does not exist" (42883).
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from coordinator_lib.compute.local_builtins import (
    DATE_TRUNC_UNITS,
    EXTRACT_FIELDS,
    TIME_FIELDS,
    normalize_unit,
)
from coordinator_lib.expr.functions import CallFunction
from coordinator_lib.expr.scalar import CallUnary, If, Literal, UnaryFunc, is_integer, is_numeric
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.errors import (
    InvalidDatetimeFormat,
    InvalidParameter,
    UndefinedOperator,
    UnsupportedFeature,
)
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.scalar import Typed, literal

if TYPE_CHECKING:
    from coordinator_lib.sql.scalar import ScalarBinder

S = ScalarType
_SMALL_INTS = (S.SMALLINT, S.INTEGER)


def _call(name: str, args: list[Typed], result: ScalarType, nullable: bool | None = None) -> Typed:
    if nullable is None:
        nullable = any(a.type.nullable for a in args)
    expr = CallFunction(name, tuple(a.expr for a in args), ColumnType(result, nullable))
    return Typed(expr, expr.type)


class _Args:
    """The arguments of one call, bound once, converted on demand."""

    def __init__(self, binder: ScalarBinder, node: exp.Expr, name: str, nodes: list[Any]):
        self.binder = binder
        self.node = node
        self.name = name
        self.nodes = list(nodes)
        self.values = [binder.bind(n) for n in self.nodes]

    def fail(self) -> Exception:
        return self.binder.no_function(self.node, self.name, self.values)

    def count(self, *allowed: int) -> None:
        if len(self.values) not in allowed:
            raise self.fail()

    def text(self, i: int) -> Typed:
        value = self.values[i]
        if value.unknown:
            return self.binder.resolve_unknown(value, S.TEXT, self.nodes[i])
        if value.scalar is not S.TEXT:
            raise self.fail()
        return value

    def integer(self, i: int) -> Typed:
        value = self.values[i]
        if value.unknown:
            return self.binder.resolve_unknown(value, S.INTEGER, self.nodes[i])
        if value.scalar not in _SMALL_INTS:
            raise self.fail()
        return self.binder.cast_to(value, S.INTEGER, self.nodes[i])

    def any_text(self, i: int) -> Typed:
        """Any argument as its text form (concat's "any"); booleans print
        as t/f there, as PostgreSQL's output function does."""
        value = self.values[i]
        if value.unknown:
            return self.binder.resolve_unknown(value, S.TEXT, self.nodes[i])
        if value.scalar is S.BOOLEAN:
            t, f = (Literal(c, ColumnType(S.TEXT, False)) for c in ("t", "f"))
            null = Literal(None, ColumnType(S.TEXT, True))
            expr = If(value.expr, t, If(_is_false(value), f, null))
            return Typed(expr, ColumnType(S.TEXT, True))
        return self.binder.cast_to(value, S.TEXT, self.nodes[i])

    def float_or_numeric(self, i: int, *, prefer: ScalarType | None = None) -> Typed:
        """The double precision or numeric overload's argument."""
        value = self.values[i]
        if value.unknown:
            return self.binder.resolve_unknown(value, prefer or S.DOUBLE, self.nodes[i])
        if not is_numeric(value.scalar):
            raise self.fail()
        target = prefer or (S.NUMERIC if value.scalar is S.NUMERIC else S.DOUBLE)
        return self.binder.cast_to(value, target, self.nodes[i])

    def constant_text(self, i: int, what: str) -> str:
        value = self.text(i)
        if not isinstance(value.expr, Literal) or value.expr.value is None:
            raise UnsupportedFeature(
                f"{self.name}: the {what} must be a constant", position_of(self.nodes[i])
            )
        return value.expr.value


def _is_false(value: Typed) -> CallUnary:
    return CallUnary(UnaryFunc.IS_FALSE, value.expr)


# --- text -------------------------------------------------------------------------


def _substring(b: ScalarBinder, node: exp.Substring) -> Typed:
    nodes = [node.this, node.args.get("start"), node.args.get("length")]
    if nodes[1] is None:
        raise b.no_function(node, "substring", [b.bind(node.this)])
    args = _Args(b, node, "substring", [n for n in nodes if n is not None])
    bound = [args.text(0), args.integer(1)] + ([args.integer(2)] if len(args.values) == 3 else [])
    return _call("substring", bound, S.TEXT)


def _trim(b: ScalarBinder, node: exp.Trim) -> Typed:
    position = (node.args.get("position") or "BOTH").upper()
    name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "btrim")
    if node.args.get("collation"):
        raise UnsupportedFeature("TRIM ... COLLATE is not supported", position_of(node))
    nodes = [node.this] + ([node.expression] if node.expression is not None else [])
    args = _Args(b, node, name, nodes)
    return _call(name, [args.text(i) for i in range(len(nodes))], S.TEXT)


def _replace(b: ScalarBinder, node: exp.Replace) -> Typed:
    args = _Args(b, node, "replace", [node.this, node.expression, node.args.get("replacement")])
    return _call("replace", [args.text(0), args.text(1), args.text(2)], S.TEXT)


def _concat(b: ScalarBinder, node: exp.Concat) -> Typed:
    args = _Args(b, node, "concat", list(node.expressions))
    if not args.values:
        raise args.fail()
    return _call("concat", [args.any_text(i) for i in range(len(args.values))], S.TEXT, False)


def _concat_ws(b: ScalarBinder, node: exp.ConcatWs) -> Typed:
    args = _Args(b, node, "concat_ws", list(node.expressions))
    if len(args.values) < 2:
        raise args.fail()
    separator = args.text(0)
    parts = [args.any_text(i) for i in range(1, len(args.values))]
    return _call("concat_ws", [separator, *parts], S.TEXT, separator.type.nullable)


def _strpos(b: ScalarBinder, node: exp.StrPosition) -> Typed:
    if node.args.get("position") or node.args.get("occurrence"):
        raise b.no_function(node, "strpos", [b.bind(node.this)])
    args = _Args(b, node, "strpos", [node.this, node.args["substr"]])
    return _call("strpos", [args.text(0), args.text(1)], S.INTEGER)


def _left_right(b: ScalarBinder, node: exp.Left | exp.Right) -> Typed:
    name = "left" if isinstance(node, exp.Left) else "right"
    args = _Args(b, node, name, [node.this, node.expression])
    return _call(name, [args.text(0), args.integer(1)], S.TEXT)


def _pad(b: ScalarBinder, node: exp.Pad) -> Typed:
    name = "lpad" if node.args.get("is_left") else "rpad"
    nodes = [node.this, node.expression]
    if node.args.get("fill_pattern") is not None:
        nodes.append(node.args["fill_pattern"])
    args = _Args(b, node, name, nodes)
    bound = [args.text(0), args.integer(1)] + ([args.text(2)] if len(nodes) == 3 else [])
    return _call(name, bound, S.TEXT)


def _split_part(b: ScalarBinder, node: exp.SplitPart) -> Typed:
    nodes = [node.this, node.args.get("delimiter"), node.args.get("part_index")]
    args = _Args(b, node, "split_part", nodes)
    return _call("split_part", [args.text(0), args.text(1), args.integer(2)], S.TEXT)


def _starts_with(b: ScalarBinder, node: exp.StartsWith) -> Typed:
    args = _Args(b, node, "starts_with", [node.this, node.expression])
    return _call("starts_with", [args.text(0), args.text(1)], S.BOOLEAN)


def _text_unary(name: str, result: ScalarType = S.TEXT) -> Callable[[Any, Any], Typed]:
    def bind(b: ScalarBinder, node: exp.Expr) -> Typed:
        args = _Args(b, node, name, [node.this])
        return _call(name, [args.text(0)], result)

    return bind


def _repeat(b: ScalarBinder, node: exp.Repeat) -> Typed:
    args = _Args(b, node, "repeat", [node.this, node.args.get("times")])
    return _call("repeat", [args.text(0), args.integer(1)], S.TEXT)


# --- math -------------------------------------------------------------------------


def _round(b: ScalarBinder, node: exp.Round) -> Typed:
    places = node.args.get("decimals")
    if places is None:
        args = _Args(b, node, "round", [node.this])
        value = args.float_or_numeric(0)
        return _call("round", [value], value.scalar)
    args = _Args(b, node, "round", [node.this, places])
    first = args.values[0]
    if not first.unknown and first.scalar in (S.REAL, S.DOUBLE):
        raise args.fail()  # PostgreSQL has round(numeric, integer) only
    value = args.float_or_numeric(0, prefer=S.NUMERIC)
    count = args.integer(1)
    return _call("round_to", [value, count], S.NUMERIC)


def _float_or_numeric(name: str) -> Callable[[Any, Any], Typed]:
    def bind(b: ScalarBinder, node: exp.Expr) -> Typed:
        if node.args.get("decimals") is not None or node.args.get("to") is not None:
            raise b.no_function(node, name, [b.bind(node.this), b.bind(node.args["decimals"])])
        args = _Args(b, node, name, [node.this])
        value = args.float_or_numeric(0)
        return _call(name, [value], value.scalar)

    return bind


def _power(b: ScalarBinder, node: exp.Pow) -> Typed:
    args = _Args(b, node, "power", [node.this, node.expression])
    known = [v.scalar for v in args.values if not v.unknown]
    if any(not is_numeric(t) for t in known):
        raise args.fail()
    floats = any(t in (S.REAL, S.DOUBLE) for t in known)
    target = S.NUMERIC if S.NUMERIC in known and not floats else S.DOUBLE
    bound = [args.float_or_numeric(i, prefer=target) for i in range(2)]
    return _call("power", bound, target)


# --- date/time --------------------------------------------------------------------


def _timestamp_arg(args: _Args, i: int) -> Typed:
    """timestamp and timestamptz stay; date becomes timestamptz (PostgreSQL's
    implicit cast picks the preferred type); text literals are timestamptz."""
    value = args.values[i]
    if value.unknown:
        return args.binder.resolve_unknown(value, S.TIMESTAMPTZ, args.nodes[i])
    if value.scalar in (S.TIMESTAMP, S.TIMESTAMPTZ):
        return value
    if value.scalar is S.DATE:
        return args.binder.cast_to(value, S.TIMESTAMPTZ, args.nodes[i])
    raise args.fail()


def _unit_text(node: exp.Expr) -> exp.Expr:
    """A Var unit (`date_trunc('day', ...)` parses it as one) as a string literal."""
    if isinstance(node, exp.Var):
        return exp.Literal.string(node.name).update_positions(node)
    return node


def _date_trunc(b: ScalarBinder, node: exp.TimestampTrunc) -> Typed:
    if node.args.get("zone") is not None:
        raise UnsupportedFeature("date_trunc with a time zone is not supported", position_of(node))
    args = _Args(b, node, "date_trunc", [_unit_text(node.args["unit"]), node.this])
    unit = normalize_unit(args.constant_text(0, "unit"))
    value = _timestamp_arg(args, 1)
    if unit not in DATE_TRUNC_UNITS:
        raise InvalidParameter(
            f'unit "{unit}" not supported for type {value.scalar.value}', position_of(node)
        )
    return _call("date_trunc", [literal(unit, S.TEXT), value], value.scalar)


def _field_call(b: ScalarBinder, node: exp.Expr, name: str, nodes: list[exp.Expr]) -> Typed:
    args = _Args(b, node, name, nodes)
    field = normalize_unit(args.constant_text(0, "field"))
    value = args.values[1]
    if value.unknown:
        value = b.resolve_unknown(value, S.TIMESTAMPTZ, nodes[1])
    if value.scalar not in (S.DATE, S.TIMESTAMP, S.TIMESTAMPTZ):
        raise args.fail()
    if field not in EXTRACT_FIELDS or (value.scalar is S.DATE and field in TIME_FIELDS):
        raise InvalidParameter(
            f'unit "{field}" not supported for type {value.scalar.value}', position_of(node)
        )
    if name == "date_part" and value.scalar is S.DATE:
        value = b.cast_to(value, S.TIMESTAMP, nodes[1])  # date_part has no date overload
    result = S.NUMERIC if name == "extract" else S.DOUBLE
    return _call(name, [literal(field, S.TEXT), value], result)


def _extract(b: ScalarBinder, node: exp.Extract) -> Typed:
    return _field_call(b, node, "extract", [_unit_text(node.this), node.expression])


# --- timestamp +/- interval '...' ---------------------------------------------------

# unit -> (months, days, microseconds) per 1
_INTERVAL_UNITS: dict[str, tuple[int, int, int]] = {
    "microseconds": (0, 0, 1),
    "milliseconds": (0, 0, 1_000),
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
    "centuries": (1200, 0, 0),
    "millennium": (12000, 0, 0),
}
_CLOCK = re.compile(r"([+-])?(\d+):(\d{1,2})(?::(\d{1,2}(?:\.\d{1,6})?))?")
_DAY_MICROS = 86_400_000_000


def parse_interval(text: str) -> tuple[int, int, int]:
    """(months, days, microseconds) of an interval constant: `1 day`,
    `2 hours 30 minutes`, `-1 month 3 days 01:30:00`, `1.5 days`. Fractions
    carry down as PostgreSQL's do (a month is 30 days, a day 24 hours)."""
    months = days = micros = 0
    tokens = text.replace(",", " ").split()
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
            unit = normalize_unit(tokens[i + 1]).rstrip("s") if i + 1 < len(tokens) else "second"
            unit = {"microsecond": "microseconds", "millisecond": "milliseconds"}.get(unit, unit)
            if unit not in _INTERVAL_UNITS:
                unit = normalize_unit(tokens[i + 1])
            m, d, us = _INTERVAL_UNITS[unit]
            whole_months = amount * m
            months += int(whole_months)
            whole_days = amount * d + (whole_months - int(whole_months)) * 30
            days += int(whole_days)
            micros += int(amount * us + (whole_days - int(whole_days)) * _DAY_MICROS)
            i += 2
    except (KeyError, decimal.InvalidOperation, IndexError):
        raise InvalidDatetimeFormat(f'invalid input syntax for type interval: "{text}"') from None
    return months, days, micros


def _interval_constant(b: ScalarBinder, node: exp.Interval) -> tuple[int, int, int]:
    value = node.this
    if not isinstance(value, exp.Literal) or not value.is_string:
        raise UnsupportedFeature("an interval must be a constant", position_of(node))
    text = value.this
    unit = node.args.get("unit")
    if unit is not None:
        text = f"{text} {unit.name}"
    try:
        return parse_interval(text)
    except InvalidDatetimeFormat as error:
        raise error.at(position_of(node)) from None


def interval_arithmetic(b: ScalarBinder, node: exp.Add | exp.Sub) -> Typed:
    """`timestamp +/- interval '...'` and `interval '...' + timestamp`: a
    timestamp, timestamptz or date (as timestamp) moved by the constant."""
    left, right = node.this, node.expression
    symbol = "+" if isinstance(node, exp.Add) else "-"
    if isinstance(left, exp.Interval) and isinstance(node, exp.Add):
        left, right = right, left
    if not isinstance(right, exp.Interval) or isinstance(left, exp.Interval):
        raise UnsupportedFeature(f"interval {symbol} interval is not supported", position_of(node))
    value = b.bind(left)
    if value.unknown:
        value = b.resolve_unknown(value, S.TIMESTAMPTZ, left)
    if value.scalar is S.DATE:
        value = b.cast_to(value, S.TIMESTAMP, left)
    if value.scalar not in (S.TIMESTAMP, S.TIMESTAMPTZ):
        raise UndefinedOperator(
            f"operator does not exist: {value.scalar.value} {symbol} interval",
            position_of(node),
            hint="No operator matches the given name and argument types. "
            "You might need to add explicit type casts.",
        )
    sign = 1 if isinstance(node, exp.Add) else -1
    months, days, micros = (sign * part for part in _interval_constant(b, right))
    parts = [literal(months, S.INTEGER), literal(days, S.INTEGER), literal(micros, S.BIGINT)]
    return _call("add_interval", [value, *parts], value.scalar)


# --- jsonb: -> ->> #> #>> @> ---------------------------------------------------------


def _jsonb(b: ScalarBinder, node: exp.Expr) -> Typed:
    value = b.bind(node)
    if value.unknown:
        value = b.resolve_unknown(value, S.JSONB, node)
    return value


def _json_keys(b: ScalarBinder, path: exp.Expr) -> list[Typed]:
    """The keys of `-> 'a'` / `-> 0` / `-> expr`: text or integer."""
    if isinstance(path, exp.JSONPath):
        keys: list[Typed] = []
        for part in path.expressions:
            if isinstance(part, exp.JSONPathRoot):
                continue
            if isinstance(part, exp.JSONPathKey) and isinstance(part.this, str):
                keys.append(literal(part.this, S.TEXT))
            elif isinstance(part, exp.JSONPathSubscript) and isinstance(part.this, int):
                keys.append(literal(part.this, S.BIGINT))
            else:
                raise UnsupportedFeature(
                    f"jsonb path {path.sql()} is not supported", position_of(path)
                )
        return keys
    key = b.bind(path)
    if key.unknown:
        key = b.resolve_unknown(key, S.TEXT, path)
    if key.scalar is not S.TEXT and not is_integer(key.scalar):
        raise UnsupportedFeature(
            f"a jsonb key must be text or an integer, not {key.scalar.value}",
            position_of(path),
        )
    return [key]


def _json_get(b: ScalarBinder, node: exp.JSONExtract | exp.JSONExtractScalar) -> Typed:
    value = _jsonb(b, node.this)
    symbol = "->>" if isinstance(node, exp.JSONExtractScalar) else "->"
    keys = _json_keys(b, node.expression)
    if value.scalar is not S.JSONB:
        shown = keys[0].scalar if keys else S.TEXT
        raise b.no_operator(node, symbol, value.scalar, shown)
    for i, key in enumerate(keys):
        last = i == len(keys) - 1
        name = "jsonb_get_text" if last and symbol == "->>" else "jsonb_get"
        result = S.TEXT if name == "jsonb_get_text" else S.JSONB
        value = _call(name, [value, key], result, True)
    return value


def _json_path(b: ScalarBinder, node: exp.JSONBExtract | exp.JSONBExtractScalar) -> Typed:
    value = _jsonb(b, node.this)
    symbol = "#>>" if isinstance(node, exp.JSONBExtractScalar) else "#>"
    path = b.bind(node.expression)
    if path.unknown:
        path = b.resolve_unknown(path, S.TEXT, node.expression)
    if value.scalar is not S.JSONB or path.scalar is not S.TEXT:
        raise b.no_operator(node, symbol, value.scalar, path.scalar)
    text = symbol == "#>>"
    name = "jsonb_get_path_text" if text else "jsonb_get_path"
    return _call(name, [value, path], S.TEXT if text else S.JSONB, True)


def _json_contains(b: ScalarBinder, node: exp.ArrayContainsAll) -> Typed:
    left, right = _jsonb(b, node.this), _jsonb(b, node.expression)
    if left.scalar is not S.JSONB or right.scalar is not S.JSONB:
        raise b.no_operator(node, "@>", left.scalar, right.scalar)
    return _call("jsonb_contains", [left, right], S.BOOLEAN)


# --- functions by name (no sqlglot node of their own) -------------------------------


def _date_part(b: ScalarBinder, node: exp.Anonymous) -> Typed:
    if len(node.expressions) != 2:
        raise b.no_function(node, "date_part", [b.bind(e) for e in node.expressions])
    return _field_call(b, node, "date_part", list(node.expressions))


def _btrim(b: ScalarBinder, node: exp.Anonymous) -> Typed:
    args = _Args(b, node, "btrim", list(node.expressions))
    args.count(1, 2)
    return _call("btrim", [args.text(i) for i in range(len(args.values))], S.TEXT)


def _octet_length(b: ScalarBinder, node: exp.Anonymous) -> Typed:
    args = _Args(b, node, "octet_length", list(node.expressions))
    args.count(1)
    return _call("octet_length", [args.text(0)], S.INTEGER)


BUILTINS: dict[type, Callable[[Any, Any], Typed]] = {
    exp.Substring: _substring,
    exp.Trim: _trim,
    exp.Replace: _replace,
    exp.Concat: _concat,
    exp.ConcatWs: _concat_ws,
    exp.StrPosition: _strpos,
    exp.Left: _left_right,
    exp.Right: _left_right,
    exp.Pad: _pad,
    exp.SplitPart: _split_part,
    exp.StartsWith: _starts_with,
    exp.Reverse: _text_unary("reverse"),
    exp.Repeat: _repeat,
    exp.MD5: _text_unary("md5"),
    exp.Round: _round,
    exp.Ceil: _float_or_numeric("ceil"),
    exp.Floor: _float_or_numeric("floor"),
    exp.Sqrt: _float_or_numeric("sqrt"),
    exp.Pow: _power,
    exp.TimestampTrunc: _date_trunc,
    exp.Extract: _extract,
    exp.JSONExtract: _json_get,
    exp.JSONExtractScalar: _json_get,
    exp.JSONBExtract: _json_path,
    exp.JSONBExtractScalar: _json_path,
    exp.ArrayContainsAll: _json_contains,
}
NAMED: dict[str, Callable[[Any, Any], Typed]] = {
    "date_part": _date_part,
    "btrim": _btrim,
    "octet_length": _octet_length,
}

# More functions, bound in their own module (it imports this one's helpers).
from coordinator_lib.sql.builtins_extra import EXTRA_BUILTINS, EXTRA_NAMED  # noqa: E402

BUILTINS.update(EXTRA_BUILTINS)
NAMED.update(EXTRA_NAMED)

__all__ = ["BUILTINS", "NAMED", "interval_arithmetic", "parse_interval"]
