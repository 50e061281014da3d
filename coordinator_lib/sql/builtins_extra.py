"""Binding more built-in functions with PostgreSQL's overloads and result
types (`sql/builtins.py` has the rest; `compute/local_builtins_extra.py`
implements these):

- ln, exp, sign, log(x), trunc(x): double precision or numeric, as the
  argument (integers take the double overload, PostgreSQL's preferred type);
  log(b, x) and trunc(x, places) are numeric; pi() is double precision;
  div(a, b) is numeric (sqlglot reads it as a cast of an integer division).
- regexp_replace(text, pattern, replacement [, flags]), `text ~ pattern`,
  `~*` (and `!~`, `!~*`, which sqlglot reads as NOT of them), initcap(text),
  ascii(text) -> integer, chr(integer) -> text, translate(text, from, to).
- date +/- integer -> date, date - date -> integer (`date_arithmetic`, called
  by the binder's `+`/`-`), make_date(y, m, d), make_timestamp(y, mo, d, h,
  mi, sec double), `ts AT TIME ZONE 'zone'` (a constant zone name),
  to_char(timestamp | timestamptz | date, constant template) -> text.
- json_build_object(k1, v1, ...) -> jsonb (SQLAlchemy's inspector asks for
  a column's collation with it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from coordinator_lib.compute.local_builtins_extra import (
    TO_CHAR_SUPPORTED,
    to_char_template,
    zone_name,
)
from coordinator_lib.expr.scalar import is_numeric
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.sql.builtins import _Args, _call, _float_or_numeric
from coordinator_lib.sql.errors import InvalidParameter, UnsupportedFeature
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.scalar import literal

if TYPE_CHECKING:
    from coordinator_lib.sql.scalar import ScalarBinder, Typed

S = ScalarType


def _log(b: ScalarBinder, node: exp.Log) -> Typed:
    if node.expression is None:
        args = _Args(b, node, "log", [node.this])
        value = args.float_or_numeric(0)
        return _call("log10", [value], value.scalar)
    args = _Args(b, node, "log", [node.this, node.expression])
    if any(not v.unknown and not is_numeric(v.scalar) for v in args.values):
        raise args.fail()
    if any(not v.unknown and v.scalar in (S.REAL, S.DOUBLE) for v in args.values):
        raise args.fail()  # log(numeric, numeric) only
    bound = [args.float_or_numeric(i, prefer=S.NUMERIC) for i in range(2)]
    return _call("log_base", bound, S.NUMERIC)


def _trunc(b: ScalarBinder, node: exp.Trunc) -> Typed:
    places = node.args.get("decimals")
    if places is None:
        args = _Args(b, node, "trunc", [node.this])
        value = args.float_or_numeric(0)
        return _call("trunc", [value], value.scalar)
    args = _Args(b, node, "trunc", [node.this, places])
    first = args.values[0]
    if not first.unknown and first.scalar in (S.REAL, S.DOUBLE):
        raise args.fail()  # trunc(numeric, integer) only
    value = args.float_or_numeric(0, prefer=S.NUMERIC)
    return _call("trunc_to", [value, args.integer(1)], S.NUMERIC)


def _pi(b: ScalarBinder, node: exp.Pi) -> Typed:
    return _call("pi", [], S.DOUBLE, False)


def _div(b: ScalarBinder, node: exp.IntDiv) -> Typed:
    args = _Args(b, node, "div", [node.this, node.expression])
    if any(not v.unknown and v.scalar in (S.REAL, S.DOUBLE) for v in args.values):
        raise args.fail()  # div(numeric, numeric) only; floats cast to numeric explicitly
    bound = [args.float_or_numeric(i, prefer=S.NUMERIC) for i in range(2)]
    return _call("div", bound, S.NUMERIC)


def _regexp_replace(b: ScalarBinder, node: exp.RegexpReplace) -> Typed:
    nodes = [node.this, node.expression, node.args.get("replacement")]
    if node.args.get("modifiers") is not None:
        nodes.append(node.args["modifiers"])
    for extra in ("position", "occurrence"):
        if node.args.get(extra) is not None:
            nodes.append(node.args[extra])
    args = _Args(b, node, "regexp_replace", nodes)
    args.count(3, 4)
    return _call("regexp_replace", [args.text(i) for i in range(len(nodes))], S.TEXT)


def _regex_match(name: str, symbol: str) -> Callable[[Any, Any], Typed]:
    def bind(b: ScalarBinder, node: exp.Expr) -> Typed:
        args = _Args(b, node, name, [node.this, node.expression])
        known = [v for v in args.values if not v.unknown]
        if any(v.scalar is not S.TEXT for v in known):
            left, right = args.values
            raise b.no_operator(node, symbol, left.scalar, right.scalar)
        return _call(name, [args.text(0), args.text(1)], S.BOOLEAN)

    return bind


def _initcap(b: ScalarBinder, node: exp.Initcap) -> Typed:
    # sqlglot fills in other dialects' default delimiters (a literal the
    # statement text does not hold: no position); a written one is an error.
    written = node.expression is not None and position_of(node.expression) is not None
    nodes = [node.this] + ([node.expression] if written else [])
    args = _Args(b, node, "initcap", nodes)
    args.count(1)
    return _call("initcap", [args.text(0)], S.TEXT)


def _ascii(b: ScalarBinder, node: exp.Ascii) -> Typed:
    args = _Args(b, node, "ascii", [node.this])
    return _call("ascii", [args.text(0)], S.INTEGER)


def _chr(b: ScalarBinder, node: exp.Chr) -> Typed:
    args = _Args(b, node, "chr", list(node.expressions))
    args.count(1)
    if node.args.get("charset"):  # chr(n USING charset): MySQL's
        raise args.fail()
    return _call("chr", [args.integer(0)], S.TEXT)


def _translate(b: ScalarBinder, node: exp.Translate) -> Typed:
    args = _Args(b, node, "translate", [node.this, node.args["from_"], node.args["to"]])
    return _call("translate", [args.text(i) for i in range(3)], S.TEXT)


# --- date/time ---------------------------------------------------------------------


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
        return _call("date_diff_days", [left, right], S.INTEGER)
    if right.scalar not in (S.SMALLINT, S.INTEGER):
        raise b.no_operator(node, symbol, left.scalar, right.scalar)
    days = b.cast_to(right, S.INTEGER, rnode)
    name = "date_add_days" if symbol == "+" else "date_sub_days"
    return _call(name, [left, days], S.DATE)


def _make_date(b: ScalarBinder, node: exp.Anonymous) -> Typed:
    args = _Args(b, node, "make_date", list(node.expressions))
    args.count(3)
    return _call("make_date", [args.integer(i) for i in range(3)], S.DATE)


def _make_timestamp(b: ScalarBinder, node: exp.TimestampFromParts) -> Typed:
    keys = ("year", "month", "day", "hour", "min", "sec")
    nodes = [node.args.get(k) for k in keys]
    extra = [k for k in node.args if k not in keys and node.args.get(k) is not None]
    if any(n is None for n in nodes) or extra:
        raise b.no_function(node, "make_timestamp", [b.bind(n) for n in nodes if n is not None])
    args = _Args(b, node, "make_timestamp", nodes)
    bound = [args.integer(i) for i in range(5)] + [args.float_or_numeric(5, prefer=S.DOUBLE)]
    return _call("make_timestamp", bound, S.TIMESTAMP)


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
        return _call("timezone_to_local", [value, literal(name, S.TEXT)], S.TIMESTAMP)
    return _call("timezone_from_local", [value, literal(name, S.TEXT)], S.TIMESTAMPTZ)


def _to_char(b: ScalarBinder, node: exp.Anonymous) -> Typed:
    """to_char(timestamp | timestamptz | date, template) -> text with a
    constant template (0A000 otherwise, and for patterns not implemented,
    `compute/local_builtins_extra.to_char`). A date is a timestamptz, as in
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
    return _call("to_char", [value, literal(template, S.TEXT), literal(zone, S.TEXT)], S.TEXT)


EXTRA_BUILTINS: dict[type, Callable[[Any, Any], Typed]] = {
    exp.Ln: _float_or_numeric("ln"),
    exp.Exp: _float_or_numeric("exp"),
    exp.Sign: _float_or_numeric("sign"),
    exp.Log: _log,
    exp.Trunc: _trunc,
    exp.Pi: _pi,
    exp.IntDiv: _div,
    exp.RegexpReplace: _regexp_replace,
    exp.RegexpLike: _regex_match("regex_match", "~"),
    exp.RegexpILike: _regex_match("regex_imatch", "~*"),
    exp.Initcap: _initcap,
    exp.Ascii: _ascii,
    exp.Chr: _chr,
    exp.Translate: _translate,
    exp.TimestampFromParts: _make_timestamp,
    exp.AtTimeZone: _at_time_zone,
}


def _json_build_object(b: ScalarBinder, node: exp.Anonymous) -> Typed:
    """json_build_object(key, value, ...) -> jsonb (Tidemark has no json type):
    keys as text, values of any type (an untyped literal is text)."""
    args = _Args(b, node, "json_build_object", list(node.expressions))
    if len(args.values) % 2:
        raise InvalidParameter("argument list must have even number of elements", position_of(node))
    values = [
        args.any_text(i) if i % 2 == 0 or args.values[i].unknown else args.values[i]
        for i in range(len(args.values))
    ]
    return _call("json_build_object", values, S.JSONB, nullable=False)


EXTRA_NAMED: dict[str, Callable[[Any, Any], Typed]] = {
    "make_date": _make_date,
    "to_char": _to_char,
    "json_build_object": _json_build_object,
}

__all__ = ["EXTRA_BUILTINS", "EXTRA_NAMED", "date_arithmetic"]
