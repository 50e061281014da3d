"""mz_now() and temporal filters in the planner (Materialize's rules).

- `mz_now()` binds to `MzNow` (expr/temporal.py): the time the query reads
  at. Compared with a value (`=`, `<`, `<=`, `>`, `>=`, BETWEEN, IN) it
  takes that value's type: integers compare as bigint (milliseconds since
  the epoch), numeric as numeric, timestamp and timestamp with time zone as
  those (a date as a timestamp), an untyped literal as bigint if it is an
  integer and as timestamptz otherwise; other types have no operator with
  it ("mz_timestamp" in the message, Materialize's name for its type).
  Anywhere else it is a bigint.
- A one-off SELECT evaluates it as its chosen timestamp (the adapter calls
  `expr.temporal.substitute_mz_now`).
- A materialized view, an index on a view and SUBSCRIBE keep their results
  up to date as time passes, so there mz_now() may only appear in a
  temporal filter: a WHERE or HAVING conjunct that compares mz_now() itself
  with an expression without mz_now(). `plan_temporal_filters` turns those
  conjuncts of each Filter into a `TemporalFilter` and refuses any other
  use ("cannot materialize call to mz_now", or "Unsupported temporal
  predicate" for a comparison it cannot use: `<>`, under OR, NOT or CASE,
  mz_now() inside arithmetic).
- Writes (INSERT, UPDATE, DELETE) refuse it, as Materialize does.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sqlglot import exp

from coordinator_lib.expr.relation import Filter, RelationExpr
from coordinator_lib.expr.scalar import BinaryFunc, CallBinary, ScalarExpr, conjuncts, is_integer
from coordinator_lib.expr.temporal import (
    FLIPPED,
    MzNow,
    TemporalBound,
    TemporalFilter,
    contains_mz_now,
    first_mz_now,
    node_mz_now_calls,
    scalar_nodes,
)
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.errors import UndefinedFunction, UndefinedOperator, UnsupportedFeature
from coordinator_lib.sql.explain import format_scalar
from coordinator_lib.sql.positions import operator_position, position_of
from coordinator_lib.sql.typed import Typed, literal

if TYPE_CHECKING:
    from coordinator_lib.sql.scalar import ScalarBinder

S = ScalarType

UNSUPPORTED_PREDICATE = (
    "Unsupported temporal predicate. Note: `mz_now()` must be directly compared to a "
    "non-temporal expression of mz_timestamp-castable type"
)
CANNOT_MATERIALIZE = "cannot materialize call to mz_now"
_HINT = (
    "In a materialized view, an index or SUBSCRIBE, mz_now() may only be compared "
    "(=, <, <=, >, >=, BETWEEN) with an expression in a WHERE or HAVING condition "
    "of ANDed terms, e.g. WHERE mz_now() <= ts + INTERVAL '5 minutes'."
)


# --------------------------------------------------------------------- binding
def bind_mz_now(binder: ScalarBinder, node: exp.Anonymous) -> Typed:
    if node.expressions:
        args = [binder.bind(a) for a in node.expressions]
        shown = ", ".join("unknown" if a.unknown else a.scalar.value for a in args)
        raise UndefinedFunction(f"function mz_now({shown}) does not exist", position_of(node))
    return Typed(MzNow(S.BIGINT, position_of(node)), ColumnType(S.BIGINT, False))


def is_mz_now(value: Typed) -> bool:
    return isinstance(value.expr, MzNow)


def _comparable(
    binder: ScalarBinder, value: Typed, node: exp.Expr | None
) -> tuple[Typed, ScalarType] | None:
    """`value` cast to a type mz_now() compares with, and that type."""
    if value.unknown:
        text = value.expr.value  # type: ignore[attr-defined]
        if text is None:
            return binder.resolve_unknown(value, S.BIGINT, node), S.BIGINT
        try:
            return literal(int(text.strip()), S.BIGINT), S.BIGINT
        except ValueError:
            return binder.resolve_unknown(value, S.TIMESTAMPTZ, node), S.TIMESTAMPTZ
    st = value.scalar
    if is_integer(st):
        return binder.cast_to(value, S.BIGINT, node), S.BIGINT
    if st is S.DATE:
        return binder.cast_to(value, S.TIMESTAMP, node), S.TIMESTAMP
    if st in (S.NUMERIC, S.TIMESTAMP, S.TIMESTAMPTZ):
        return value, st
    return None


def compare_mz_now(
    binder: ScalarBinder,
    node: exp.Expr,
    func: BinaryFunc,
    symbol: str,
    left: Typed,
    right: Typed,
    nodes: tuple[exp.Expr | None, exp.Expr | None] | None = None,
) -> Typed:
    """`left func right` where one side (or both) is mz_now() itself."""
    lnode, rnode = nodes or (node.args.get("this"), node.args.get("expression"))
    if is_mz_now(left) and is_mz_now(right):
        return binder.typed(CallBinary(func, left.expr, right.expr))
    mz_left = is_mz_now(left)
    mz, other, other_node = (left, right, rnode) if mz_left else (right, left, lnode)
    found = _comparable(binder, other, other_node)
    if found is None:
        shown = other.scalar.value
        sides = f"mz_timestamp {symbol} {shown}" if mz_left else f"{shown} {symbol} mz_timestamp"
        raise UndefinedOperator.no_overload(
            sides,
            operator_position(node),
            hint="mz_now() compares with integers (milliseconds since the epoch), numeric, "
            "date, timestamp and timestamp with time zone values.",
        )
    other, target = found
    assert isinstance(mz.expr, MzNow)
    now = MzNow(target, mz.expr.position)
    pair = (now, other.expr) if mz_left else (other.expr, now)
    return binder.typed(CallBinary(func, *pair))


# ------------------------------------------------------------- maintained views
def _position(call: MzNow | None, text: str) -> int | None:
    """The call's position if it is in this statement's text (a call from an
    inlined view has a position in that view's text)."""
    if call is None or call.position is None or not text:
        return None
    start = call.position - 1
    return call.position if text[start : start + 6].lower() == "mz_now" else None


def _calls(expr: ScalarExpr) -> list[MzNow]:
    return [n for n in scalar_nodes(expr) if isinstance(n, MzNow)]


def temporal_bound(predicate: ScalarExpr) -> TemporalBound | None:
    """`mz_now() op e` (or `e op mz_now()`) with e free of mz_now(), as a bound."""
    if not isinstance(predicate, CallBinary) or predicate.func not in FLIPPED:
        return None
    left, right = predicate.left, predicate.right
    if isinstance(left, MzNow) and not _calls(right):
        return TemporalBound(predicate.func, right)
    if isinstance(right, MzNow) and not _calls(left):
        return TemporalBound(FLIPPED[predicate.func], left)
    return None


def _extract(node: RelationExpr, text: str) -> RelationExpr:
    changes: dict[str, object] = {}
    for f in dataclasses.fields(node):  # type: ignore[arg-type]
        value = getattr(node, f.name)
        if isinstance(value, RelationExpr):
            new = _extract(value, text)
            if new is not value:
                changes[f.name] = new
        elif isinstance(value, tuple) and value and isinstance(value[0], RelationExpr):
            items = tuple(_extract(v, text) for v in value)
            if any(a is not b for a, b in zip(items, value, strict=True)):
                changes[f.name] = items
    if changes:
        node = dataclasses.replace(node, **changes)  # type: ignore[type-var]
    if isinstance(node, Filter):
        bounds: list[TemporalBound] = []
        rest: list[ScalarExpr] = []
        for predicate in node.predicates:
            for part in conjuncts(predicate) if _calls(predicate) else [predicate]:
                if not _calls(part):
                    rest.append(part)
                    continue
                bound = temporal_bound(part)
                if bound is None:
                    raise UnsupportedFeature(
                        UNSUPPORTED_PREDICATE,
                        _position(_calls(part)[0], text),
                        detail=f"Expression found: {format_scalar(part)}",
                        hint=_HINT,
                    )
                bounds.append(bound)
        if not bounds:
            return node
        inner = Filter(node.input, tuple(rest)) if rest else node.input
        return TemporalFilter(inner, tuple(bounds))
    calls = node_mz_now_calls(node)
    if calls:
        raise UnsupportedFeature(CANNOT_MATERIALIZE, _position(calls[0], text), hint=_HINT)
    return node


def plan_temporal_filters(expr: RelationExpr, text: str = "") -> RelationExpr:
    """The plan of a maintained view: each Filter's mz_now() comparisons as a
    TemporalFilter above the rest; any other mz_now() is an error (0A000).
    `text` is the statement's, for error positions."""
    if not contains_mz_now(expr):
        return expr
    return _extract(expr, text)


def refuse_in_writes(exprs: list[RelationExpr], text: str = "") -> None:
    """INSERT, UPDATE and DELETE may not call mz_now() (Materialize's rule)."""
    for expr in exprs:
        call = first_mz_now(expr)
        if call is not None:
            raise UnsupportedFeature(
                "calls to mz_now in write statements are not supported", _position(call, text)
            )


__all__ = [
    "CANNOT_MATERIALIZE",
    "UNSUPPORTED_PREDICATE",
    "bind_mz_now",
    "compare_mz_now",
    "is_mz_now",
    "plan_temporal_filters",
    "refuse_in_writes",
    "temporal_bound",
]
