"""Binding calls of the registered scalar functions (`expr/functions/`):
the registry says which functions a name means, their overloads and result
types; this module maps sqlglot's syntax to a name and argument list and
picks the overload with PostgreSQL's rules (`resolve_call`).

Resolution, as PostgreSQL's func_select_candidate in short: an overload
fits when each argument is an untyped literal, is of the parameter's type,
or casts to it implicitly; among those that fit, the most exact matches
win, then the most parameters of a preferred type (double precision,
timestamptz, text). Untyped literals then take the parameter's type, other
arguments are cast to it. Nothing fits: "function ... does not exist"
(42883).

A few calls need more than an overload: a constant unit, field, zone or
template checked at plan time (date_trunc, extract, date_part, AT TIME ZONE,
to_char), operators whose errors name the operator (jsonb's, `~`), and
the operators of intervals and timestamps and date arithmetic, bound from
`+`, `-`, `*` and `/`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from coordinator_lib.expr.functions import (
    REGISTRY,
    CallFunction,
    Pseudo,
    ScalarFunction,
    Signature,
    functions_named,
)
from coordinator_lib.expr.functions.datetime import (
    DATE_TRUNC_UNITS,
    EXTRACT_FIELDS,
    TIME_FIELDS,
    normalize_unit,
    zone_name,
)
from coordinator_lib.expr.functions.interval import INTERVAL_FIELDS, TIME_OF_DAY_FIELDS
from coordinator_lib.expr.functions.to_char import TO_CHAR_SUPPORTED, to_char_template
from coordinator_lib.expr.scalar import CallUnary, If, Literal, UnaryFunc, is_integer, is_numeric
from coordinator_lib.repr.interval import Interval, IntervalFieldOverflow
from coordinator_lib.repr.interval import parse_interval as read_interval
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.array_syntax import bind_array, bind_subscript
from coordinator_lib.sql.coercion import can_cast_implicitly
from coordinator_lib.sql.errors import (
    IntervalFieldOverflowError,
    InvalidDatetimeFormat,
    InvalidParameter,
    SqlError,
    UnsupportedFeature,
)
from coordinator_lib.sql.list_syntax import (
    LIST_FUNCTIONS,
    bind_array_function,
    bind_list,
    bind_list_function,
)
from coordinator_lib.sql.map_syntax import bind_map
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.typed import Typed, literal

if TYPE_CHECKING:
    from coordinator_lib.sql.scalar import ScalarBinder

S = ScalarType
_PREFERRED = (S.DOUBLE, S.TIMESTAMPTZ, S.TEXT)


# --- overload resolution ------------------------------------------------------------


def _fit(values: Sequence[Typed], params: Sequence[Any]) -> tuple[int, int] | None:
    """(exact matches, preferred parameters) of an overload, None if it does not fit."""
    exact = preferred = 0
    for value, param in zip(values, params, strict=True):
        if param is Pseudo.ANY_ARRAY and (value.unknown or not value.scalar.is_array):
            return None
        if param is Pseudo.ANY_MAP and (value.unknown or not value.scalar.is_map):
            return None
        if isinstance(param, Pseudo):
            continue
        if not value.unknown and value.scalar is param:
            exact += 1
            continue
        if not value.unknown and not can_cast_implicitly(value.scalar, param):
            return None
        preferred += param in _PREFERRED
    return exact, preferred


def _as_text(b: ScalarBinder, value: Typed, node: exp.Expr) -> Typed:
    """Any argument as its text form (concat's "any"); booleans print as
    t/f there, as PostgreSQL's output function does."""
    if value.unknown:
        return b.resolve_unknown(value, S.TEXT, node)
    if value.scalar is S.BOOLEAN:
        t, f = (Literal(c, ColumnType(S.TEXT, False)) for c in ("t", "f"))
        null = Literal(None, ColumnType(S.TEXT, True))
        expr = If(value.expr, t, If(_is_false(value), f, null))
        return Typed(expr, ColumnType(S.TEXT, True))
    return b.cast_to(value, S.TEXT, node)


def _convert(b: ScalarBinder, value: Typed, param: Any, node: exp.Expr) -> Typed:
    if param is Pseudo.ANY_TEXT:
        return _as_text(b, value, node)
    if param in (Pseudo.ANY_ARRAY, Pseudo.ANY_MAP):
        return value
    if param is Pseudo.ANY:
        return b.resolve_unknown(value, S.TEXT, node) if value.unknown else value
    return b.cast_to(value, param, node)


def resolve_call(
    b: ScalarBinder,
    node: exp.Expr,
    name: str,
    nodes: Sequence[exp.Expr],
    values: Sequence[Typed] | None = None,
    candidates: Sequence[ScalarFunction] | None = None,
) -> Typed:
    """The call `name(nodes...)` (`values`: the arguments already bound)
    as the best overload of `candidates` (by default what `name` means)."""
    if values is None:
        values = [b.bind(n) for n in nodes]
    best: tuple[tuple[int, int], ScalarFunction, Signature, tuple[Any, ...]] | None = None
    for function in functions_named(name) if candidates is None else candidates:
        for signature in function.signatures:
            params = signature.params_for(len(values))
            score = None if params is None else _fit(values, params)
            if params is not None and score is not None and (best is None or score > best[0]):
                best = (score, function, signature, params)
    if best is None:
        raise b.no_function(node, name, list(values))
    _, function, signature, params = best
    args = [_convert(b, v, p, n) for v, p, n in zip(values, params, nodes, strict=True)]
    nullable = function.result_nullable([a.type.nullable for a in args])
    expr = CallFunction(
        function.name, tuple(a.expr for a in args), ColumnType(signature.result, nullable)
    )
    return Typed(expr, expr.type)


def _named(name: str, *functions: str) -> Callable[[ScalarBinder, exp.Expr, list[exp.Expr]], Typed]:
    """Bind by overloads only, as `name` (of `functions`, by default what `name` means)."""
    candidates = [REGISTRY[f] for f in functions] or None

    def bind(b: ScalarBinder, node: exp.Expr, nodes: list[exp.Expr]) -> Typed:
        return resolve_call(b, node, name, nodes, candidates=candidates)

    return bind


class _Args:
    """The arguments of one call with a bespoke binding, bound once."""

    def __init__(self, b: ScalarBinder, node: exp.Expr, name: str, nodes: Sequence[exp.Expr]):
        self.binder, self.node, self.name = b, node, name
        self.nodes = list(nodes)
        self.values = [b.bind(n) for n in self.nodes]

    def fail(self) -> Exception:
        return self.binder.no_function(self.node, self.name, self.values)

    def count(self, *allowed: int) -> None:
        if len(self.values) not in allowed:
            raise self.fail()

    def constant_text(self, i: int, what: str) -> str:
        value = self.values[i]
        if value.unknown:
            value = self.binder.resolve_unknown(value, S.TEXT, self.nodes[i])
        if value.scalar is not S.TEXT:
            raise self.fail()
        if not isinstance(value.expr, Literal) or value.expr.value is None:
            raise UnsupportedFeature(
                f"{self.name}: the {what} must be a constant", position_of(self.nodes[i])
            )
        return str(value.expr.value)

    def call(self, function: str, values: list[Typed] | None = None) -> Typed:
        """The overload of `function` for `values` (default: the arguments)."""
        values = self.values if values is None else values
        nodes = self.nodes if len(self.nodes) == len(values) else [self.node] * len(values)
        return resolve_call(
            self.binder, self.node, self.name, nodes, values, candidates=[REGISTRY[function]]
        )


def _is_false(value: Typed) -> CallUnary:
    return CallUnary(UnaryFunc.IS_FALSE, value.expr)


# --- what sqlglot's nodes mean -------------------------------------------------------


def _args(*keys: str) -> Callable[[exp.Expr], list[exp.Expr]]:
    """The node's arguments under `keys` that are present, in that order."""
    return lambda node: [node.args[k] for k in keys if node.args.get(k) is not None]


# sqlglot node -> (the name it calls, its argument nodes): bound by overloads alone.
_SYNTAX: dict[type, tuple[Callable[[Any], str], Callable[[Any], list[exp.Expr]]]] = {
    exp.Substring: (lambda n: "substring", _args("this", "start", "length")),
    exp.UnixToTime: (lambda n: "to_timestamp", _args("this")),
    exp.JustifyDays: (lambda n: "justify_days", _args("this")),
    exp.JustifyHours: (lambda n: "justify_hours", _args("this")),
    exp.JustifyInterval: (lambda n: "justify_interval", _args("this")),
    exp.ArraySize: (lambda n: "array_length", _args("this", "expression")),
    exp.Trim: (
        lambda n: {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(
            (n.args.get("position") or "BOTH").upper(), "btrim"
        ),
        _args("this", "expression"),
    ),
    exp.Replace: (lambda n: "replace", _args("this", "expression", "replacement")),
    exp.Concat: (lambda n: "concat", lambda n: list(n.expressions)),
    exp.ConcatWs: (lambda n: "concat_ws", lambda n: list(n.expressions)),
    exp.StrPosition: (lambda n: "strpos", _args("this", "substr", "position", "occurrence")),
    exp.Left: (lambda n: "left", _args("this", "expression")),
    exp.Right: (lambda n: "right", _args("this", "expression")),
    exp.Pad: (
        lambda n: "lpad" if n.args.get("is_left") else "rpad",
        _args("this", "expression", "fill_pattern"),
    ),
    exp.SplitPart: (lambda n: "split_part", _args("this", "delimiter", "part_index")),
    exp.StartsWith: (lambda n: "starts_with", _args("this", "expression")),
    exp.Reverse: (lambda n: "reverse", _args("this")),
    exp.BitLength: (lambda n: "bit_length", _args("this")),
    exp.Repeat: (lambda n: "repeat", _args("this", "times")),
    exp.MD5: (lambda n: "md5", _args("this")),
    exp.Round: (lambda n: "round", _args("this", "decimals")),
    exp.Ceil: (lambda n: "ceil", _args("this", "decimals", "to")),
    exp.Floor: (lambda n: "floor", _args("this", "decimals", "to")),
    exp.Sqrt: (lambda n: "sqrt", _args("this")),
    exp.Pow: (lambda n: "power", _args("this", "expression")),
    exp.Ln: (lambda n: "ln", _args("this")),
    exp.Exp: (lambda n: "exp", _args("this")),
    exp.Sign: (lambda n: "sign", _args("this")),
    exp.Log: (lambda n: "log", _args("this", "expression")),
    exp.Trunc: (lambda n: "trunc", _args("this", "decimals")),
    exp.Pi: (lambda n: "pi", _args()),
    exp.IntDiv: (lambda n: "div", _args("this", "expression")),
    exp.RegexpReplace: (
        lambda n: "regexp_replace",
        _args("this", "expression", "replacement", "modifiers", "position", "occurrence"),
    ),
    exp.Ascii: (lambda n: "ascii", _args("this")),
    exp.Translate: (lambda n: "translate", _args("this", "from_", "to")),
    exp.StringToArray: (lambda n: "string_to_array", _args("this", "expression", "null")),
    # sqlglot fills in other dialects' default delimiters (a literal the
    # statement text does not hold: no position); a written one is an error.
    exp.Initcap: (
        lambda n: "initcap",
        lambda n: (
            [n.this]
            + ([n.expression] if n.expression is not None and position_of(n.expression) else [])
        ),
    ),
}


def _make_timestamp(b: ScalarBinder, node: exp.TimestampFromParts) -> Typed:
    keys = ("year", "month", "day", "hour", "min", "sec")
    nodes = [node.args.get(k) for k in keys]
    extra = [k for k in node.args if k not in keys and node.args.get(k) is not None]
    if any(n is None for n in nodes) or extra:
        raise b.no_function(node, "make_timestamp", [b.bind(n) for n in nodes if n is not None])
    return resolve_call(b, node, "make_timestamp", [n for n in nodes if n is not None])


def _chr(b: ScalarBinder, node: exp.Chr) -> Typed:
    if node.args.get("charset"):  # chr(n USING charset): MySQL's
        raise b.no_function(node, "chr", [b.bind(e) for e in node.expressions])
    return resolve_call(b, node, "chr", list(node.expressions))


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
    return args.call("date_trunc", [literal(unit, S.TEXT), value])


def _field_call(b: ScalarBinder, node: exp.Expr, name: str, nodes: list[exp.Expr]) -> Typed:
    args = _Args(b, node, name, nodes)
    field = normalize_unit(args.constant_text(0, "field"))
    value = args.values[1]
    if value.unknown:
        value = b.resolve_unknown(value, S.TIMESTAMPTZ, nodes[1])
    if value.scalar in (S.INTERVAL, S.TIME):
        kind = "interval" if value.scalar is S.INTERVAL else "time"
        shown = "interval" if value.scalar is S.INTERVAL else "time without time zone"
        if field not in EXTRACT_FIELDS:
            raise InvalidParameter(
                f'unit "{field}" not recognized for type {shown}', position_of(node)
            )
        if field not in (INTERVAL_FIELDS if kind == "interval" else TIME_OF_DAY_FIELDS):
            raise UnsupportedFeature(
                f'unit "{field}" not supported for type {shown}', position_of(node)
            )
        return args.call(f"{name}_{kind}", [literal(field, S.TEXT), value])
    if value.scalar not in (S.DATE, S.TIMESTAMP, S.TIMESTAMPTZ):
        raise args.fail()
    if field not in EXTRACT_FIELDS or (value.scalar is S.DATE and field in TIME_FIELDS):
        raise InvalidParameter(
            f'unit "{field}" not supported for type {value.scalar.value}', position_of(node)
        )
    if name == "date_part" and value.scalar is S.DATE:
        value = b.cast_to(value, S.TIMESTAMP, nodes[1])  # date_part has no date overload
    return args.call(name, [literal(field, S.TEXT), value])


def _extract(b: ScalarBinder, node: exp.Extract) -> Typed:
    return _field_call(b, node, "extract", [_unit_text(node.this), node.expression])


def _regex_match(name: str, symbol: str) -> Callable[[Any, Any], Typed]:
    def bind(b: ScalarBinder, node: exp.Expr) -> Typed:
        args = _Args(b, node, name, [node.this, node.expression])
        if any(not v.unknown and v.scalar is not S.TEXT for v in args.values):
            left, right = args.values
            raise b.no_operator(node, symbol, left.scalar, right.scalar)
        return args.call(name)

    return bind


def _json_get(b: ScalarBinder, node: exp.JSONExtract | exp.JSONExtractScalar) -> Typed:
    value = _jsonb(b, node.this)
    symbol = "->>" if isinstance(node, exp.JSONExtractScalar) else "->"
    keys = _json_keys(b, node.expression)
    # `->` (`->>` of map[text=>text] kept for jsonb's users, as webhooks write it)
    if value.scalar.is_map and (symbol == "->" or value.scalar is S.MAP_TEXT):
        return _map_get(b, node, value, keys, symbol)
    if value.scalar is not S.JSONB:
        shown = keys[0].scalar if keys else S.TEXT
        raise b.no_operator(node, symbol, value.scalar, shown)
    for i, key in enumerate(keys):
        last = i == len(keys) - 1
        name = "jsonb_get_text" if last and symbol == "->>" else "jsonb_get"
        if is_integer(key.scalar):
            key = b.cast_to(key, S.BIGINT, node)
        value = _nullable(_Args(b, node, name, []).call(name, [value, key]))
    return value


def _map_get(
    b: ScalarBinder, node: exp.Expr, value: Typed, keys: list[Typed], symbol: str
) -> Typed:
    """`m -> k1 -> k2 ...`: each step the value of the map's value type T
    (NULL when absent). A map holds T's text output (repr/text_map.py), or
    the carried text itself for text, jsonb and maps, which is read as T."""
    for key in keys:
        value_type = value.scalar.map_value
        if value.unknown or value_type is None:
            raise b.no_operator(node, symbol, value.scalar, key.scalar)
        entry = _nullable(_Args(b, node, symbol, []).call("map_get", [value, key]))
        if value_type in (S.TEXT, S.JSONB) or value_type.is_map:
            assert isinstance(entry.expr, CallFunction)
            expr = CallFunction(entry.expr.name, entry.expr.args, ColumnType(value_type, True))
            value = Typed(expr, expr.type)
        else:
            value = b.cast_to(entry, value_type, node)
    return value


def _map_keys_test(name: str, symbol: str) -> Callable[[Any, Any], Typed]:
    """`map ? key`, `map ?& keys`, `map ?| keys` (Materialize's map; jsonb's
    are not bound)."""

    def bind(b: ScalarBinder, node: exp.Expr) -> Typed:
        args = _Args(b, node, symbol, [node.this, node.expression])
        if args.values[0].unknown or not args.values[0].scalar.is_map:
            left, right = args.values
            raise b.no_operator(node, symbol, left.scalar, right.scalar)
        return args.call(name)

    return bind


def _nullable(value: Typed) -> Typed:
    """jsonb's lookups are NULL when the key is absent, whatever the inputs."""
    assert isinstance(value.expr, CallFunction)
    expr = CallFunction(value.expr.name, value.expr.args, ColumnType(value.scalar, True))
    return Typed(expr, expr.type)


def _json_path(b: ScalarBinder, node: exp.JSONBExtract | exp.JSONBExtractScalar) -> Typed:
    value = _jsonb(b, node.this)
    symbol = "#>>" if isinstance(node, exp.JSONBExtractScalar) else "#>"
    path = b.bind(node.expression)
    if path.unknown:
        path = b.resolve_unknown(path, S.TEXT, node.expression)
    if value.scalar is not S.JSONB or path.scalar is not S.TEXT:
        raise b.no_operator(node, symbol, value.scalar, path.scalar)
    name = "jsonb_get_path_text" if symbol == "#>>" else "jsonb_get_path"
    return _nullable(_Args(b, node, name, []).call(name, [value, path]))


def _contains(flipped: bool) -> Callable[[Any, Any], Typed]:
    """`a @> b` (`b <@ a` when flipped) of two jsonb values or two maps (an
    untyped literal takes the other side's type)."""
    symbol = "<@" if flipped else "@>"

    def bind(b: ScalarBinder, node: exp.Expr) -> Typed:
        nodes = [node.this, node.expression]
        values = [b.bind(n) for n in nodes]
        known = [v.scalar for v in values if not v.unknown]
        kind = next((st for st in known if st.is_map), S.JSONB)
        values = [
            b.resolve_unknown(v, kind, n) if v.unknown else v
            for v, n in zip(values, nodes, strict=True)
        ]
        left, right = values
        if left.scalar is not kind or right.scalar is not kind:
            raise b.no_operator(node, symbol, left.scalar, right.scalar)
        name = "map_contains_map" if kind.is_map else "jsonb_contains"
        return _Args(b, node, symbol, []).call(name, values[::-1] if flipped else values)

    return bind


def _date_part(b: ScalarBinder, node: exp.Anonymous) -> Typed:
    if len(node.expressions) != 2:
        raise b.no_function(node, "date_part", [b.bind(e) for e in node.expressions])
    return _field_call(b, node, "date_part", list(node.expressions))


def _json_build_object(b: ScalarBinder, node: exp.Anonymous) -> Typed:
    """json_build_object(key, value, ...) -> jsonb (Tidemark has no json type):
    keys as text, values of any type (an untyped literal is text)."""
    if len(node.expressions) % 2:
        raise InvalidParameter("argument list must have even number of elements", position_of(node))
    return resolve_call(b, node, "json_build_object", list(node.expressions))


def _pg_typeof(b: ScalarBinder, node: exp.Anonymous) -> Typed:
    """pg_typeof(x): the type's name as PostgreSQL's regtype prints it, a
    constant of the plan ('unknown' for an untyped literal, as PostgreSQL)."""
    if len(node.expressions) != 1:
        raise b.no_function(node, "pg_typeof", [b.bind(n) for n in node.expressions])
    value = b.bind(node.expressions[0])
    return literal("unknown" if value.unknown else regtype_name(value.scalar), S.TEXT)


def regtype_name(st: ScalarType) -> str:
    """`st` as PostgreSQL's regtype output names it (`integer[]`,
    `timestamp without time zone`; a list as Materialize names it, `integer list`)."""
    if st.element is not None:
        return regtype_name(st.element) + (" list" if st.is_list else "[]")
    return "timestamp without time zone" if st is S.TIMESTAMP else st.value


def _unit_text(node: exp.Expr) -> exp.Expr:
    """A Var unit (`date_trunc('day', ...)` parses it as one) as a string literal."""
    if isinstance(node, exp.Var):
        return exp.Literal.string(node.name).update_positions(node)
    return node


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


def parse_interval(
    text: str, qualifier: str | None = None, precision: int | None = None
) -> tuple[int, int, int]:
    """(months, days, microseconds) of an interval constant
    (repr/interval.parse_interval): a bad one 22007, a field out of range 22015."""
    try:
        value = read_interval(text, qualifier, precision)
    except IntervalFieldOverflow as error:
        raise IntervalFieldOverflowError(str(error)) from None
    except ValueError as error:
        raise InvalidDatetimeFormat(str(error)) from None
    return value.months, value.days, value.micros


_QUALIFIER = re.compile(r"([A-Z ]+?)(?:\((\d*)\))?")


def interval_constant(node: exp.Interval) -> tuple[int, int, int]:
    """(months, days, microseconds) of `INTERVAL '...' [qualifier]`, which
    must be a constant; the qualifier (`DAY TO SECOND(3)`, from dialect.py)
    restricts its fields as PostgreSQL's does."""
    value = node.this
    if not isinstance(value, exp.Literal) or not value.is_string:
        raise UnsupportedFeature("an interval must be a constant", position_of(node))
    unit = node.args.get("unit")
    qualifier = precision = None
    if unit is not None:
        parts = _QUALIFIER.fullmatch(unit.name.upper())
        if parts is None:
            raise UnsupportedFeature(f"interval qualifier {unit.name}", position_of(node))
        qualifier = parts.group(1).strip()
        precision = int(parts.group(2)) if parts.group(2) else None
    try:
        return parse_interval(value.this, qualifier, precision)
    except SqlError as error:
        raise error.at(position_of(value) or position_of(node)) from None


def bind_interval(b: ScalarBinder, node: exp.Interval) -> Typed:
    """`INTERVAL '...' [unit]`: an interval constant."""
    return literal(Interval(*interval_constant(node)), S.INTERVAL)


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


def _at_time_zone(b: ScalarBinder, node: exp.AtTimeZone) -> Typed:
    """`timestamptz AT TIME ZONE 'zone'` -> timestamp (the wall clock there),
    `timestamp AT TIME ZONE 'zone'` -> timestamptz; a date is timestamptz.
    The zone is a constant IANA name (case-insensitive), checked here."""
    args = _Args(b, node, "timezone", [node.args["zone"], node.this])
    zone = args.constant_text(0, "time zone")
    value = args.values[1]
    if value.unknown:
        value = b.resolve_unknown(value, S.TIMESTAMPTZ, node.this)
    elif value.scalar is S.DATE:
        value = b.cast_to(value, S.TIMESTAMPTZ, node.this)
    if value.scalar not in (S.TIMESTAMP, S.TIMESTAMPTZ):
        raise args.fail()
    try:
        name = zone_name(zone)
    except ValueError as error:
        raise InvalidParameter(str(error), position_of(node.args["zone"])) from None
    if value.scalar is S.TIMESTAMPTZ:
        return args.call("timezone_to_local", [value, literal(name, S.TEXT)])
    return args.call("timezone_from_local", [value, literal(name, S.TEXT)])


def _to_char(b: ScalarBinder, node: exp.Anonymous) -> Typed:
    """to_char(timestamp | timestamptz | date, template) -> text with a
    constant template (0A000 otherwise, and for patterns not implemented,
    `expr/functions/to_char.py`). A date is a timestamptz, as in
    PostgreSQL; a timestamptz goes in as its UTC wall clock and TZ prints
    "UTC" (the session's zone). to_char of a number is 0A000."""
    args = _Args(b, node, "to_char", list(node.expressions))
    args.count(2)
    value = args.values[0]
    if not value.unknown and is_numeric(value.scalar):
        raise UnsupportedFeature(
            f"to_char({value.scalar.value}, text) is not supported: only timestamps and "
            "dates can be formatted",
            position_of(node),
        )
    if value.unknown or value.scalar not in (S.TIMESTAMP, S.TIMESTAMPTZ, S.DATE):
        raise args.fail()
    template = args.constant_text(1, "template")
    for kind, item, _ in to_char_template(template):
        if kind == "suffix" or (kind == "key" and item not in TO_CHAR_SUPPORTED):
            raise UnsupportedFeature(
                f'to_char: template pattern "{item}" is not supported',
                position_of(node.expressions[1]),
            )
    if template == "":
        return literal(None, S.TEXT)  # PostgreSQL's to_char of an empty template is NULL
    zone = ""
    if value.scalar is not S.TIMESTAMP:
        zone = "UTC"
        value = b.cast_to(b.cast_to(value, S.TIMESTAMPTZ, node), S.TIMESTAMP, node)
    return args.call("to_char", [value, literal(template, S.TEXT), literal(zone, S.TEXT)])


_TIMES = (S.DATE, S.TIMESTAMP, S.TIMESTAMPTZ)


def interval_negation(b: ScalarBinder, node: exp.Expr, value: Typed) -> Typed:
    return _Args(b, node, "-", []).call("interval_neg", [value])


def interval_cmp_key(b: ScalarBinder, node: exp.Expr, value: Typed) -> Typed:
    """What intervals compare by (=, <, ...): microseconds with 30-day
    months and 24-hour days, as PostgreSQL's interval_cmp."""
    return _Args(b, node, "=", []).call("interval_cmp_key", [value])


def interval_arithmetic(
    b: ScalarBinder, node: exp.Binary, symbol: str, left: Typed, right: Typed
) -> Typed | None:
    """The operators of intervals, times and timestamps
    (expr/functions/interval.py), None when neither operand is an interval
    or a time nor both timestamps: timestamp +/- interval (a date is a
    timestamp), interval + timestamp, timestamp - timestamp, interval +/-
    interval, interval * and / a number, number * interval, time +/-
    interval, time - time, date + time."""
    lt, rt = left.scalar, right.scalar
    call = _Args(b, node, symbol, []).call
    if symbol == "-" and lt in _TIMES[1:] and rt in _TIMES[1:]:
        target = S.TIMESTAMP if lt is rt is S.TIMESTAMP else S.TIMESTAMPTZ
        values = [b.cast_to(v, target, n) for v, n in ((left, node.this), (right, node.expression))]
        return call("timestamp_diff", values)
    if S.INTERVAL not in (lt, rt) and S.TIME not in (lt, rt):
        return None
    if symbol == "+" and (rt in _TIMES or (rt is S.TIME and lt is S.INTERVAL)):
        left, right, lt, rt = right, left, rt, lt
    if symbol == "+" and lt is S.DATE and rt is S.TIME:
        return call("date_add_time", [left, right])
    if lt is S.TIME and rt is S.TIME and symbol == "-":
        return call("time_diff", [left, right])
    if lt is rt is S.INTERVAL and symbol in "+-":
        return call("interval_add" if symbol == "+" else "interval_sub", [left, right])
    if lt in (*_TIMES, S.TIME) and rt is S.INTERVAL and symbol in "+-":
        if lt is S.DATE:
            left = b.cast_to(left, S.TIMESTAMP, node.this)
        if symbol == "-":
            right = call("interval_neg", [right])
        return call("time_add_interval" if lt is S.TIME else "add_interval", [left, right])
    if symbol in "*/" and S.INTERVAL in (lt, rt) and is_numeric(lt if rt is S.INTERVAL else rt):
        if symbol == "*" and lt is not S.INTERVAL:
            left, right = right, left
        if left.scalar is S.INTERVAL:
            factor = b.cast_to(right, S.DOUBLE, node)
            return call("interval_mul" if symbol == "*" else "interval_div", [left, factor])
    raise b.no_operator(node, symbol, lt, rt)


def date_arithmetic(b: ScalarBinder, node: exp.Add | exp.Sub, left: Typed, right: Typed) -> Typed:
    """`date + integer`, `integer + date`, `date - integer` -> date and
    `date - date` -> integer (days); smallint counts as integer, other
    types are 42883 (PostgreSQL has no date + bigint)."""
    symbol = "+" if isinstance(node, exp.Add) else "-"
    lnode, rnode = node.this, node.expression
    if isinstance(node, exp.Add) and right.scalar is S.DATE and left.scalar is not S.DATE:
        left, right, lnode, rnode = right, left, rnode, lnode
    if left.scalar is not S.DATE:
        raise b.no_operator(node, symbol, left.scalar, right.scalar)
    if right.scalar is S.DATE and symbol == "-":
        return _Args(b, node, symbol, []).call("date_diff_days", [left, right])
    if right.scalar not in (S.SMALLINT, S.INTEGER):
        raise b.no_operator(node, symbol, left.scalar, right.scalar)
    days = b.cast_to(right, S.INTEGER, rnode)
    name = "date_add_days" if symbol == "+" else "date_sub_days"
    return _Args(b, node, symbol, []).call(name, [left, days])


_BESPOKE: dict[type, Callable[[Any, Any], Typed]] = {
    exp.Array: bind_array,
    exp.List: bind_list,
    exp.ToMap: bind_map,
    exp.Bracket: bind_subscript,
    exp.TimestampFromParts: _make_timestamp,
    exp.Chr: _chr,
    exp.TimestampTrunc: _date_trunc,
    exp.Extract: _extract,
    exp.Interval: bind_interval,
    exp.AtTimeZone: _at_time_zone,
    exp.RegexpLike: _regex_match("regex_match", "~"),
    exp.RegexpILike: _regex_match("regex_imatch", "~*"),
    exp.JSONExtract: _json_get,
    exp.JSONBContainsTopKey: _map_keys_test("map_contains_key", "?"),
    exp.JSONBContainsAllTopKeys: _map_keys_test("map_contains_all_keys", "?&"),
    exp.JSONBContainsAnyTopKeys: _map_keys_test("map_contains_any_keys", "?|"),
    exp.JSONExtractScalar: _json_get,
    exp.JSONBExtract: _json_path,
    exp.JSONBExtractScalar: _json_path,
    exp.ArrayConcat: bind_array_function,
    exp.ArrayAppend: bind_array_function,
    exp.ArrayPrepend: bind_array_function,
    exp.ArrayContainsAll: _contains(flipped=False),
    exp.ArrayContainedBy: _contains(flipped=True),
}
_BESPOKE_NAMED: dict[str, Callable[[Any, Any], Typed]] = {
    "date_part": _date_part,
    "to_char": _to_char,
    "json_build_object": _json_build_object,
    "pg_typeof": _pg_typeof,
    **dict.fromkeys(LIST_FUNCTIONS, bind_list_function),
}


def binds_node(node: exp.Expr) -> bool:
    """Whether `node` is a function call this module binds."""
    return type(node) in _SYNTAX or type(node) in _BESPOKE


def bind_node(b: ScalarBinder, node: exp.Expr) -> Typed:
    """A function call sqlglot parsed into a node of its own (`binds_node`)."""
    bespoke = _BESPOKE.get(type(node))
    if bespoke is not None:
        return bespoke(b, node)
    name, nodes = _SYNTAX[type(node)]
    if isinstance(node, exp.Trim) and node.args.get("collation"):
        raise UnsupportedFeature("TRIM ... COLLATE is not supported", position_of(node))
    return resolve_call(b, node, name(node), nodes(node))


def called_name(node: exp.Expr) -> str:
    """The function a node of `_SYNTAX` calls: `TRIM(LEADING ...)` calls ltrim."""
    return _SYNTAX[type(node)][0](node)


def binds_name(name: str) -> bool:
    """Whether `name(...)` (sqlglot's Anonymous) is a registered function."""
    return name in _BESPOKE_NAMED or bool(functions_named(name))


def bind_named(b: ScalarBinder, node: exp.Anonymous, name: str) -> Typed:
    bespoke = _BESPOKE_NAMED.get(name)
    if bespoke is not None:
        return bespoke(b, node)
    return resolve_call(b, node, name, list(node.expressions))


__all__ = [
    "bind_interval",
    "bind_named",
    "bind_node",
    "binds_name",
    "binds_node",
    "date_arithmetic",
    "interval_arithmetic",
    "interval_cmp_key",
    "interval_constant",
    "interval_negation",
    "parse_interval",
    "resolve_call",
]
