"""Intervals group, deduplicate and order as PostgreSQL's interval_cmp does.

PostgreSQL's `=` on intervals compares one number, the microseconds with
30-day months and 24-hour days, so '1 mon', '30 days' and '720 hours' are
one group in GROUP BY, DISTINCT, UNION, count(DISTINCT) and PARTITION BY,
though they stay three values (they add to timestamps differently). Both
engines group by value, so the planner builds each of these groupings on
`interval_cmp_key` (expr/functions/interval.py) instead, the one rule
either engine runs:

- a GROUP BY or DISTINCT column that is an interval becomes its key, and
  the group prints max() of its values: the one with the most months, then
  days (`Interval`'s order). PostgreSQL prints the first value it read,
  which depends on the scan; it is this one when that value was read first.
  A maintained view has no read order, so it keeps a rule that a retraction
  cannot make ambiguous;
- count(DISTINCT interval) counts distinct keys;
- a window's PARTITION BY and ORDER BY, and TopK's group and order
  (ORDER BY ... LIMIT, DISTINCT ON), use the key, so rows of equal keys are
  peers; TopK's tie-break by the whole row then orders them alike on both
  engines (Spark orders the struct by field, which for equal keys is
  `Interval`'s order).

Only the user's groupings: the planner's own Distincts (decorrelated outer
rows, outer joins' matched keys) must keep values apart, since they are
joined back by value. Joins need nothing here: `=` on intervals is already
bound to the key.

INTERSECT and EXCEPT [ALL] over interval columns match rows by key too
(`matched`): both sides are grouped by the key row, counting each side's
rows, and a group that survives prints max() of its left side's values, as
often as PostgreSQL's rule for its counts says (once, min(l, r) or l - r).
"""

from __future__ import annotations

import dataclasses

from coordinator_lib.expr.functions.registry import CallFunction
from coordinator_lib.expr.relation import (
    AggregateExpr,
    AggregateFunc,
    Distinct,
    Filter,
    FlatMap,
    Map,
    OrderKey,
    Project,
    Reduce,
    RelationExpr,
    TopK,
    Union,
    Window,
)
from coordinator_lib.expr.scalar import (
    BinaryFunc,
    CallBinary,
    CallVariadic,
    Column,
    Literal,
    ScalarExpr,
    VariadicFunc,
)
from coordinator_lib.expr.table_functions import TableFunc
from coordinator_lib.repr.relation import ColumnType, ScalarType


def cmp_key(value: ScalarExpr, typ: ColumnType) -> ScalarExpr:
    """`interval_cmp_key(value)`: what PostgreSQL's `=` and `<` compare."""
    return CallFunction("interval_cmp_key", (value,), ColumnType(ScalarType.NUMERIC, typ.nullable))


def _is_interval(typ: ColumnType) -> bool:
    return typ.scalar_type is ScalarType.INTERVAL


def distinct(rel: RelationExpr) -> RelationExpr:
    """SELECT DISTINCT / UNION: each group of equal rows once."""
    d = rel.desc
    if not any(_is_interval(t) for t in d.types):
        return Distinct(rel)
    return grouped(Reduce(rel, tuple(Column(i) for i in range(d.arity)), (), d.names))


def distinct_by_key(node: Reduce) -> Reduce:
    """count(DISTINCT interval) counts distinct keys."""
    types = node.input.desc.types
    aggregates = tuple(
        dataclasses.replace(a, expr=cmp_key(a.expr, a.expr.typ(types)))
        if a.distinct and a.func is AggregateFunc.COUNT and _is_interval(a.expr.typ(types))
        else a
        for a in node.aggregates
    )
    if aggregates == node.aggregates:
        return node
    return dataclasses.replace(node, aggregates=aggregates)


def grouped(node: Reduce) -> RelationExpr:
    """GROUP BY an interval as GROUP BY its key, printing max() of the group."""
    node = distinct_by_key(node)
    types, aggregates = node.input.desc.types, node.aggregates
    intervals = [i for i, k in enumerate(node.group_key) if _is_interval(k.typ(types))]
    if not intervals:
        return node
    keys = tuple(
        cmp_key(k, k.typ(types)) if i in intervals else k for i, k in enumerate(node.group_key)
    )
    shown = tuple(AggregateExpr(AggregateFunc.MAX, node.group_key[i]) for i in intervals)
    reduce = Reduce(node.input, keys, aggregates + shown, node.names)
    width, first_shown = len(keys), len(keys) + len(aggregates)
    outputs = [first_shown + intervals.index(i) if i in intervals else i for i in range(width)]
    outputs += range(width, width + len(aggregates))
    return Project(reduce, tuple(outputs), node.desc.names)


def ordered(node: Window | TopK) -> RelationExpr:
    """A window's or TopK's interval columns grouped and ordered by their key."""
    d = node.input.desc
    group = node.partition_key if isinstance(node, Window) else node.group_key
    used = sorted({*group, *(o.column for o in node.order_key)})
    intervals = [c for c in used if _is_interval(d.types[c])]
    if not intervals:
        return node
    key_of = {c: d.arity + n for n, c in enumerate(intervals)}
    mapped = Map(node.input, tuple(cmp_key(Column(c), d.types[c]) for c in intervals))
    group = tuple(key_of.get(c, c) for c in group)
    order: list[OrderKey] = []
    for o in node.order_key:
        if o.column in key_of:
            order.append(OrderKey(key_of[o.column], o.desc, o.nulls_last))
        else:
            order.append(o)
    if isinstance(node, Window):
        inner: RelationExpr = dataclasses.replace(
            node, input=mapped, partition_key=group, order_key=tuple(order)
        )
        added = range(d.arity + len(intervals), inner.desc.arity)
        names = (*d.names, *node.desc.names[d.arity :])
    else:
        inner = dataclasses.replace(node, input=mapped, group_key=group, order_key=tuple(order))
        added = range(0)
        names = d.names
    return Project(inner, (*range(d.arity), *added), tuple(names))


def matched(
    left: RelationExpr, right: RelationExpr, intersect: bool, distinct: bool
) -> RelationExpr | None:
    """INTERSECT / EXCEPT [ALL] with interval columns matched by key (None
    when there are none: rows then match by value)."""
    d = left.desc
    intervals = [i for i, t in enumerate(d.types) if _is_interval(t)]
    if not intervals:
        return None
    yes = Literal(True, ColumnType(ScalarType.BOOLEAN, False))
    no = Literal(None, ColumnType(ScalarType.BOOLEAN, True))

    def keyed(rel: RelationExpr, shown: bool, side: tuple[Literal, Literal]) -> RelationExpr:
        """The row with its intervals as keys, then the values it shows (only
        the left side's: NULL on the right), then a tag per side."""
        keys = tuple(
            cmp_key(Column(i), d.types[i]) if i in intervals else Column(i) for i in range(d.arity)
        )
        values = tuple(
            Column(i) if shown else Literal(None, ColumnType(ScalarType.INTERVAL, True))
            for i in intervals
        )
        mapped = Map(rel, (*keys, *values, *side))
        return Project(mapped, tuple(range(d.arity, d.arity + len(keys) + len(values) + 2)))

    both = Union((keyed(left, True, (yes, no)), keyed(right, False, (no, yes))))
    width = d.arity + len(intervals)
    counts = (AggregateExpr(AggregateFunc.COUNT, Column(width + k)) for k in (0, 1))
    shown = (AggregateExpr(AggregateFunc.MAX, Column(d.arity + n)) for n in range(len(intervals)))
    reduce = Reduce(both, tuple(Column(i) for i in range(d.arity)), (*counts, *shown), d.names)
    lefts, rights = Column(d.arity), Column(d.arity + 1)
    zero = Literal(0, ColumnType(ScalarType.BIGINT, False))
    out: RelationExpr
    if distinct:
        rights_test = BinaryFunc.GT if intersect else BinaryFunc.EQ
        out = Filter(
            reduce, (CallBinary(BinaryFunc.GT, lefts, zero), CallBinary(rights_test, rights, zero))
        )
    else:
        copies = (
            CallVariadic(VariadicFunc.LEAST, (lefts, rights))
            if intersect
            else CallBinary(BinaryFunc.SUB, lefts, rights)
        )
        one = Literal(1, ColumnType(ScalarType.BIGINT, False))
        out = FlatMap(
            Map(reduce, (one, copies)),
            TableFunc.GENERATE_SERIES,
            (Column(reduce.desc.arity), Column(reduce.desc.arity + 1), Column(reduce.desc.arity)),
        )
    first_shown = d.arity + 2
    outputs = tuple(
        first_shown + intervals.index(i) if i in intervals else i for i in range(d.arity)
    )
    return Project(out, outputs, d.names)


__all__ = ["cmp_key", "distinct", "distinct_by_key", "grouped", "matched", "ordered"]
