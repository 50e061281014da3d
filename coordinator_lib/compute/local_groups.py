"""A COUNT/SUM/MIN/MAX group in-process as accumulators, not its rows.

A Reduce whose aggregates are all MIN, MAX, COUNT or exact SUM
(plan.Reduce.accumulators) has each group's output as a function of a few
running sums: the group's multiplicity and, per COUNT/SUM, the sum of
value x diff and the sum of diff over non-NULL values (a SUM of no non-NULL
value is NULL, a COUNT is the latter); and per MIN/MAX, of its first values
in order. An in-process step over arrangements keeps the sums as one row per
group key and each MIN/MAX's values in order (compute/arranged.py), so a
touched group costs one state row plus, per MIN/MAX, one row more than the
delta retracts from it, whatever its size; the accumulating reduce on Spark
(accumulate.py) keeps the same sums.
"""

from __future__ import annotations

import decimal
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from coordinator_lib.compute import float_sum
from coordinator_lib.compute.local_scalar import (
    Compiled,
    EvalError,
    aggregate_values,
    check_range,
    compile_scalar,
    float_result,
    to_numeric,
)
from coordinator_lib.compute.order_bytes import ord_bytes
from coordinator_lib.compute.plan import ORDERED_AGGREGATES
from coordinator_lib.expr import relation as rel
from coordinator_lib.repr.numeric import ARITHMETIC
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.repr.update import Row

_Spec = tuple[tuple[ColumnType, ...], list[bool], list[bool], list[ScalarType], list[Compiled]]
# id(reduce) -> (a weak reference to it, its spec): the aggregates are typed
# once per plan, not once per group (a step makes a few per touched group).
# Weak, so that the entry goes when its plan does: every ad-hoc aggregate
# query plans a new Reduce, and a strong reference kept each whole plan
# (joins, descs, expressions) alive until 1024 had piled up (issue 18's soak).
_SPECS: dict[int, tuple[weakref.ref[rel.Reduce], _Spec]] = {}


def _spec(reduce: rel.Reduce) -> _Spec:
    """(input types, whether each aggregate sums numerics, whether it sums
    floats, result types, its argument compiled)."""
    key = id(reduce)
    found = _SPECS.get(key)
    if found is not None and found[0]() is reduce:
        return found[1]
    types = reduce.input.desc.types
    out_types = [a.typ(types).scalar_type for a in reduce.aggregates]
    numeric = [
        a.func is rel.AggregateFunc.SUM and t is ScalarType.NUMERIC
        for a, t in zip(reduce.aggregates, out_types, strict=True)
    ]
    floats = [
        a.func is rel.AggregateFunc.SUM and t in (ScalarType.REAL, ScalarType.DOUBLE)
        for a, t in zip(reduce.aggregates, out_types, strict=True)
    ]

    def forget(ref: weakref.ref[rel.Reduce]) -> None:
        if _SPECS.get(key, (None,))[0] is ref:  # not a newer plan at the same address
            _SPECS.pop(key, None)

    values = [compile_scalar(a.expr, types) for a in reduce.aggregates]
    spec = (types, numeric, floats, out_types, values)
    _SPECS[key] = (weakref.ref(reduce, forget), spec)
    return spec


@dataclass(frozen=True)
class GroupError:
    """A group's output when its aggregate fails (a sum beyond its type): in
    place of the group's row, so a change of the group that makes it fail,
    or stop failing, is an update of the step's errors (as Materialize's
    reduce sends an aggregate's error to errs), not a stopped step."""

    code: str
    message: str


class Accumulators:
    """One group's accumulators, `(rows, s0, n0, s1, n1, ...)` as `values`.
    A DISTINCT COUNT/SUM counts and sums the values present (multiplicity
    above 0): `seen` holds the multiplicities of the values it is told of
    (`(aggregate position, value)`; all of them when built from the rows,
    those a step's delta touches when read from state), and a value adds to
    (leaves) the accumulators when its multiplicity rises above 0 (falls to 0)."""

    def __init__(
        self,
        reduce: rel.Reduce,
        values: Row | None = None,
        seen: dict[tuple[int, Any], int] | None = None,
    ) -> None:
        self.reduce = reduce
        self.seen: dict[tuple[int, Any], int] = {} if seen is None else dict(seen)
        self.types, self.numeric, self.floats, self.out_types, self.arguments = _spec(reduce)
        if values is None:
            zero: list[Any] = [0]
            for numeric, floats in zip(self.numeric, self.floats, strict=True):
                zero += [decimal.Decimal(0) if numeric else float_sum.ZERO if floats else 0, 0]
            values = tuple(zero)
        self.values: list[Any] = list(values)

    def add(self, row: Row, diff: int) -> None:
        """Take in `diff` copies of `row` (a row of the Reduce's input)."""
        values = self.values
        values[0] += diff
        for i, aggregate in enumerate(self.reduce.aggregates):
            if aggregate.func in ORDERED_AGGREGATES:
                continue
            value = self.arguments[i](row)
            if value is None:
                continue
            weight = diff
            if aggregate.distinct:
                before = self.seen.get((i, value), 0)
                self.seen[(i, value)] = before + diff
                weight = (before + diff > 0) - (before > 0)  # the value came (1), left (-1)
                if not weight:
                    continue
            values[2 + 2 * i] += weight
            if aggregate.func is rel.AggregateFunc.SUM:
                if self.numeric[i]:
                    term = ARITHMETIC.multiply(decimal.Decimal(value), weight)
                    values[1 + 2 * i] = ARITHMETIC.add(values[1 + 2 * i], term)
                elif self.floats[i]:
                    values[1 + 2 * i] = float_sum.add(values[1 + 2 * i], value, weight)
                else:
                    values[1 + 2 * i] += value * weight

    def row(self) -> Row:
        return tuple(self.values)

    def copy(self) -> Accumulators:
        return Accumulators(self.reduce, self.row(), self.seen)

    def is_empty(self) -> bool:
        return not any(v != float_sum.ZERO if isinstance(v, tuple) else v for v in self.values)

    def output(self, key: Row, firsts: dict[int, Counter[Row]]) -> Counter[Row]:
        """The group's output row (none while its multiplicity is not
        positive); `firsts`: per MIN/MAX aggregate (by position), rows
        holding its first values in order (local_groups.ordered)."""
        if self.values[0] <= 0:
            return Counter()
        try:
            return Counter({key + self._aggregates(firsts): 1})
        except EvalError as error:  # the aggregate's own failure (a sum's overflow)
            return Counter({cast(Row, GroupError(error.code, error.message)): 1})

    def _aggregates(self, firsts: dict[int, Counter[Row]]) -> Row:
        values = self.values
        out: list[Any] = []
        for i, aggregate in enumerate(self.reduce.aggregates):
            total, count = values[1 + 2 * i], values[2 + 2 * i]
            if aggregate.func in ORDERED_AGGREGATES:
                present = [(row, n) for row, n in firsts[i].items() if n > 0]
                out.append(aggregate_values(aggregate, present, self.types))
            elif aggregate.func is rel.AggregateFunc.COUNT:
                out.append(count)
            elif count == 0:
                out.append(None)
            elif self.numeric[i]:
                out.append(to_numeric(total))
            elif self.floats[i]:
                out.append(float_result(partial(float_sum.result, total), self.out_types[i]))
            else:
                out.append(check_range(total, self.out_types[i]))
        return tuple(out)


def distinct_values(reduce: rel.Reduce) -> Callable[[Row], list[tuple[int, Any]]]:
    """A row's non-NULL values of each DISTINCT aggregate, `(position, value)`:
    the keys of `Accumulators.seen` (kept arranged by group key and these)."""
    types = reduce.input.desc.types
    distinct = [
        (i, compile_scalar(a.expr, types)) for i, a in enumerate(reduce.aggregates) if a.distinct
    ]

    def values(row: Row) -> list[tuple[int, Any]]:
        found = [(i, value(row)) for i, value in distinct]
        return [(i, v) for i, v in found if v is not None]

    return values


def ordered(reduce: rel.Reduce) -> dict[int, Callable[[Row], bytes]]:
    """Per MIN/MAX aggregate (by position), a row's place in its order:
    its value first for MIN, last for MAX, NULLs after every value."""
    types = reduce.input.desc.types

    def place(aggregate: rel.AggregateExpr) -> Callable[[Row], bytes]:
        desc = aggregate.func is rel.AggregateFunc.MAX
        value = compile_scalar(aggregate.expr, types)
        return lambda row: ord_bytes(value(row), desc, True)

    return {i: place(a) for i, a in enumerate(reduce.aggregates) if a.func in ORDERED_AGGREGATES}
