"""Joins built from the plan language's inner Join: equivalence classes,
joins on equal-or-both-NULL values, and outer joins.

A Join equivalence class requires its members equal and not NULL. Matching
rows by value where NULL must meet NULL (a row against the distinct values
derived from it) uses two classes per nullable column: `c IS NULL` and
`coalesce(c, zero)`, both never NULL.

An outer join is lowered as Materialize does, to operators that all have
delta rules: the inner join, plus the rows of the preserved side that found
no match, padded with NULLs. "Found no match" is decided on the columns the
ON condition reads (the match keys): the unmatched rows are
`side - (side ⋈ distinct(matched keys))`, a Union with a Negate, exact for
duplicates too.

A predicate that reads one input only filters that input below the join
(Materialize's predicate pushdown), so the join and its arrangements never
hold the rows it drops. Only predicates that cannot fail move: evaluated on
rows the join would have dropped, a failing one would add errors.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from typing import Any

from coordinator_lib.expr.relation import (
    Distinct,
    Filter,
    Join,
    Map,
    Negate,
    Project,
    RelationExpr,
    Union,
)
from coordinator_lib.expr.scalar import (
    COMPARISON_OPERATORS,
    CallBinary,
    CallUnary,
    CallVariadic,
    Column,
    Literal,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
)
from coordinator_lib.repr.interval import ZERO
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.outer import columns_read, rewrite

S = ScalarType
_ZERO: dict[ScalarType, Any] = {
    S.BOOLEAN: False,
    S.SMALLINT: 0,
    S.INTEGER: 0,
    S.BIGINT: 0,
    S.REAL: 0.0,
    S.DOUBLE: 0.0,
    S.NUMERIC: decimal.Decimal(0),
    S.TEXT: "",
    S.BPCHAR: "",
    S.BYTEA: b"",
    S.DATE: dt.date(1970, 1, 1),
    S.TIMESTAMP: dt.datetime(1970, 1, 1),
    S.TIMESTAMPTZ: dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
    S.JSONB: "null",
    **{st: "{}" for st in S if st.is_map},
    S.INTERVAL: ZERO,
    S.TIME: dt.time(0),
}


# An array column compares by value too: its zero is the empty array.
_ZERO.update({t: () for t in S if t.element is not None})


def equivalence_classes(classes: list[list[ScalarExpr]], a: ScalarExpr, b: ScalarExpr) -> None:
    """Record a = b in `classes`, merging the classes either is already in."""
    found = [c for c in classes if a in c or b in c]
    merged: list[ScalarExpr] = []
    for c in found:
        classes.remove(c)
        merged += [e for e in c if e not in merged]
    for e in (a, b):
        if e not in merged:
            merged.append(e)
    classes.append(merged)


def null_safe_equivalences(
    pairs: list[tuple[int, int]], types: tuple[ColumnType, ...]
) -> list[tuple[ScalarExpr, ...]]:
    """Join equivalences that hold when each pair of columns (over the
    join's concatenated columns, typed `types`) is not distinct."""
    classes: list[tuple[ScalarExpr, ...]] = []
    for a, b in pairs:
        if not (types[a].nullable or types[b].nullable):
            classes.append((Column(a), Column(b)))
            continue
        zero = Literal(_ZERO[types[a].scalar_type], ColumnType(types[a].scalar_type, False))
        classes.append(
            (CallUnary(UnaryFunc.IS_NULL, Column(a)), CallUnary(UnaryFunc.IS_NULL, Column(b)))
        )
        classes.append(
            (
                CallVariadic(VariadicFunc.COALESCE, (Column(a), zero)),
                CallVariadic(VariadicFunc.COALESCE, (Column(b), zero)),
            )
        )
    return classes


def semijoin(rel: RelationExpr, keys: list[int], values: RelationExpr) -> RelationExpr:
    """The rows of `rel` whose `keys` columns are (not distinct from) a row
    of `values`, which must hold each value once."""
    arity = rel.desc.arity
    types = rel.desc.types + values.desc.types
    classes = null_safe_equivalences([(k, arity + i) for i, k in enumerate(keys)], types)
    return Project(Join((rel, values), tuple(classes)), tuple(range(arity)), rel.desc.names)


def unmatched(rel: RelationExpr, keys: list[int], matched: RelationExpr) -> RelationExpr:
    """The rows of `rel` whose `keys` columns are not a row of `matched`
    (distinct key values, each also a key value of some row of `rel`)."""
    return Union((rel, Negate(semijoin(rel, keys, matched))))


def pad(rel: RelationExpr, types: tuple[ColumnType, ...], before: bool) -> RelationExpr:
    """`rel` with NULL columns of `types` appended (or, `before`, prepended)."""
    nulls = tuple(Literal(None, ColumnType(t.scalar_type, True)) for t in types)
    mapped = Map(rel, nulls)
    arity = rel.desc.arity
    if not before:
        return mapped
    outputs = tuple(range(arity, arity + len(types))) + tuple(range(arity))
    return Project(mapped, outputs)


def distinct_keys(rel: RelationExpr, columns: list[int]) -> RelationExpr:
    """The distinct values of `columns` of `rel`."""
    return Distinct(Project(rel, tuple(columns)))


def outer_join(
    left: RelationExpr,
    right: RelationExpr,
    predicates: list[ScalarExpr],
    side: str,
    build: Callable[[list[RelationExpr], list[ScalarExpr]], RelationExpr],
) -> RelationExpr:
    """`left side JOIN right ON predicates` (side LEFT, RIGHT or FULL), the
    predicates over left's columns then right's; `build` makes the inner join."""
    arity = left.desc.arity
    inner = build([left, right], predicates)
    read = sorted({c for p in predicates for c in columns_read(p)})
    parts = [inner]
    if side in ("LEFT", "FULL"):
        keys = [c for c in read if c < arity]
        lost = unmatched(left, keys, distinct_keys(inner, keys))
        parts.append(pad(lost, right.desc.types, before=False))
    if side in ("RIGHT", "FULL"):
        keys = [c - arity for c in read if c >= arity]
        matched = distinct_keys(inner, [arity + k for k in keys])
        parts.append(pad(unmatched(right, keys, matched), left.desc.types, before=True))
    return Union(tuple(parts))


# Scalars that cannot fail on any row: comparisons, AND/OR/NOT and NULL
# tests of columns and literals (a comparison's operands have one type).
_SAFE_UNARY = {UnaryFunc.NOT, UnaryFunc.IS_NULL, UnaryFunc.IS_NOT_NULL}
_SAFE_VARIADIC = {VariadicFunc.AND, VariadicFunc.OR}


def cannot_fail(expr: ScalarExpr) -> bool:
    """Whether `expr` is made only of operations that cannot fail."""
    if isinstance(expr, Column | Literal):
        return True
    if isinstance(expr, CallBinary):
        safe = expr.func in COMPARISON_OPERATORS
    elif isinstance(expr, CallUnary):
        safe = expr.func in _SAFE_UNARY
    elif isinstance(expr, CallVariadic):
        safe = expr.func in _SAFE_VARIADIC
    else:
        return False
    return safe and all(cannot_fail(child) for child in expr.children())


def push_down(
    inputs: list[RelationExpr], predicates: list[ScalarExpr]
) -> tuple[list[RelationExpr], list[ScalarExpr]]:
    """The join's inputs with each predicate that reads one input only (and
    cannot fail) applied to it as a Filter, and the predicates left to
    filter the join's output."""
    starts = Join(tuple(inputs), ()).input_offsets()
    ends = [start + child.desc.arity for start, child in zip(starts, inputs, strict=True)]
    pushed: list[list[ScalarExpr]] = [[] for _ in inputs]
    residual: list[ScalarExpr] = []
    for predicate in predicates:
        read = predicate.columns()
        owners = [
            i
            for i, (a, b) in enumerate(zip(starts, ends, strict=True))
            if read and a <= min(read) and max(read) < b
        ]
        if owners and cannot_fail(predicate):
            (i,) = owners
            pushed[i].append(_shifted(predicate, -starts[i]))
        else:
            residual.append(predicate)
    filtered = [
        Filter(child, tuple(own)) if own else child
        for child, own in zip(inputs, pushed, strict=True)
    ]
    return filtered, residual


def _shifted(expr: ScalarExpr, by: int) -> ScalarExpr:
    return rewrite(expr, lambda e: Column(e.index + by) if isinstance(e, Column) else None)
