"""The delta rules of render.py, executed in-process over Python rows.

Spark's per-job overhead (about a second per step here, several for a join
and aggregate) dwarfs the work of a small step, so a step whose inputs are
small runs here instead: same rules, same (old, delta) contract, same output
written through compare_and_append. dataflow.py chooses the engine from the
inputs' sizes in their batch metadata, before reading anything.

`old` is computed lazily (a parent asks for it only if its rule needs it).
A row of a delta whose scalar evaluation fails (Filter, Map, a Reduce's keys
and arguments) becomes an update of `LocalContext.errors` with its time and
diff, and leaves the data (compute/error_collection.py); in `old` it only
leaves the data (its error was taken in by an earlier step).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING

from coordinator_lib.compute.budget import Tally, charge_list
from coordinator_lib.compute.error_collection import error_update
from coordinator_lib.compute.join_plan import first_filters, join_steps
from coordinator_lib.compute.local_ordered import render_ordered
from coordinator_lib.compute.local_scalar import EvalError, aggregate_values, eval_scalar
from coordinator_lib.compute.rules import rule_for
from coordinator_lib.expr.relation import (
    AggregateExpr,
    Constant,
    Distinct,
    Filter,
    Get,
    Join,
    Map,
    Negate,
    Project,
    Reduce,
    RelationExpr,
    Threshold,
    TopK,
    Union,
    Window,
)
from coordinator_lib.expr.scalar import Column, Literal, ScalarExpr
from coordinator_lib.expr.temporal import TemporalFilter
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import ColumnType
from coordinator_lib.repr.update import Row, Update

if TYPE_CHECKING:
    from coordinator_lib.compute.arranged import StepState

OldRows = list[tuple[Row, int]]
DeltaRows = list[Update]


@dataclass
class LocalRendered:
    old: Callable[[], OldRows] | None
    delta: DeltaRows | None


@dataclass
class LocalContext:
    lower: int
    upper: int
    inputs: dict[GlobalId, LocalRendered]
    hydrating: bool = False
    rules: list[tuple[str, str]] = field(default_factory=list)
    # The step's error updates, rows (code, message) (the errs collection).
    errors: list[Update] = field(default_factory=list)
    # The dataflow's arrangements (compute/arranged.py): a join, Reduce,
    # TopK or Window reads the keys its delta touches there, not its
    # input's old contents. None: read the old contents.
    state: StepState | None = None


def _lazy(compute: Callable[[], OldRows]) -> Callable[[], OldRows]:
    return cache(compute)


def render_local(expr: RelationExpr, ctx: LocalContext) -> LocalRendered:
    ctx.rules.append((type(expr).__name__, rule_for(expr).value))
    if isinstance(expr, Get):
        return ctx.inputs[expr.id]
    if isinstance(expr, Constant):
        rows = list(expr.rows)
        if not rows:
            return LocalRendered(None, None)
        if ctx.hydrating:
            return LocalRendered(None, [Update(r, ctx.lower, d) for r, d in rows])
        return LocalRendered(lambda: rows, None)
    if isinstance(expr, Filter):
        types = expr.input.desc.types

        def keep(row: Row) -> bool:
            return all(eval_scalar(p, row, types) is True for p in expr.predicates)

        return _map_rows(
            render_local(expr.input, ctx), lambda row: row if keep(row) else None, ctx.errors
        )
    if isinstance(expr, Map):
        all_types = expr.desc.types

        def extend(row: Row) -> Row:
            out = list(row)
            for scalar in expr.scalars:
                out.append(eval_scalar(scalar, tuple(out), all_types[: len(out)]))
            return tuple(out)

        return _map_rows(render_local(expr.input, ctx), extend, ctx.errors)
    if isinstance(expr, Project):
        outputs = expr.outputs
        return _map_rows(render_local(expr.input, ctx), lambda row: tuple(row[i] for i in outputs))
    if isinstance(expr, Negate):
        inner = render_local(expr.input, ctx)
        old = inner.old
        return LocalRendered(
            None if old is None else _lazy(lambda: charge_list([(r, -d) for r, d in old()])),
            None
            if inner.delta is None
            else charge_list([Update(r, t, -d) for r, t, d in inner.delta]),
        )
    if isinstance(expr, Union):
        parts = [render_local(child, ctx) for child in expr.inputs_]
        olds = [p.old for p in parts if p.old is not None]
        deltas = [p.delta for p in parts if p.delta is not None]
        return LocalRendered(
            _lazy(lambda: charge_list([row for old in olds for row in old()])) if olds else None,
            charge_list([u for delta in deltas for u in delta]) if deltas else None,
        )
    if isinstance(expr, Join):
        return _join(expr, ctx)
    if isinstance(expr, Reduce):
        return _reduce(
            _checked(render_local(expr.input, ctx), expr, ctx),
            expr.input.desc.types,
            expr.group_key,
            expr.aggregates,
            ctx,
            "reduce",
        )
    if isinstance(expr, Distinct | Threshold):
        arity = expr.input.desc.arity
        keys = tuple(Column(i) for i in range(arity))
        mode = "threshold" if isinstance(expr, Threshold) else "reduce"
        return _reduce(render_local(expr.input, ctx), expr.input.desc.types, keys, (), ctx, mode)
    if isinstance(expr, TopK | Window):
        inner = render_local(expr.input, ctx)
        return LocalRendered(*render_ordered(expr, inner.old, inner.delta, ctx.state))
    if isinstance(expr, TemporalFilter):
        from coordinator_lib.compute.temporal import render_temporal_local  # imports this module

        return render_temporal_local(expr, render_local(expr.input, ctx), ctx)
    raise TypeError(f"no local rendering for {type(expr).__name__}")


def _map_rows(
    rendered: LocalRendered,
    op: Callable[[Row], Row | None],
    errors: list[Update] | None = None,
) -> LocalRendered:
    """`op` on old and delta rows (None drops the row). With `errors`, a row
    `op` fails on leaves the data, and a delta row's failure is an error update."""
    old = rendered.old

    def mapped_old() -> OldRows:
        assert old is not None
        out: OldRows = []
        tally = Tally(out)
        for row, diff in old():
            try:
                new = op(row)
            except EvalError:
                if errors is None:
                    raise
                new = None
            if new is not None:
                out.append((new, diff))
            tally.add()
        tally.settle()
        return out

    delta = None
    if rendered.delta is not None:
        delta = []
        tally = Tally(delta)
        for row, t, d in rendered.delta:
            try:
                new = op(row)
            except EvalError as error:
                if errors is None:
                    raise
                errors.append(error_update(error, t, d))
                new = None
            if new is not None:
                delta.append(Update(new, t, d))
            tally.add()
        tally.settle()
    return LocalRendered(None if old is None else _lazy(mapped_old), delta)


def _checked(rendered: LocalRendered, expr: Reduce, ctx: LocalContext) -> LocalRendered:
    """A Reduce's input without the rows its group key or aggregate arguments
    fail on (their errors go to `ctx.errors`), as if a Map computed them first."""
    exprs = [*expr.group_key, *(a.expr for a in expr.aggregates)]
    if all(isinstance(e, Column | Literal) for e in exprs):
        return rendered
    types = expr.input.desc.types

    def check(row: Row) -> Row:
        for e in exprs:
            eval_scalar(e, row, types)
        return row

    return _map_rows(rendered, check, ctx.errors)


# ----------------------------------------------------------------------- join
def _join(expr: Join, ctx: LocalContext) -> LocalRendered:
    types = expr.desc.types
    padded_width = expr.desc.arity

    def check(row: Row, pairs: tuple[tuple[ScalarExpr, ScalarExpr], ...]) -> bool:
        padded = row + (None,) * (padded_width - len(row))
        for a, b in pairs:
            left, right = eval_scalar(a, padded, types), eval_scalar(b, padded, types)
            if left is None or right is None or left != right:
                return False
        return True

    parts = [render_local(child, ctx) for child in expr.inputs_]
    firsts = first_filters(expr)
    accumulated = _map_rows(parts[0], lambda row: row if check(row, firsts) else None)
    for step, part in zip(join_steps(expr), parts[1:], strict=True):
        accumulated = _binary_join(
            accumulated,
            part,
            step.keys,
            step.filters,
            step.left_width,
            types,
            padded_width,
            check,
            ctx.state,
        )
    return accumulated


def _binary_join(left, right, keys, filters, left_width, types, padded_width, check, state):  # type: ignore[no-untyped-def]
    def key_of(row: Row, exprs: list[ScalarExpr], offset: int) -> tuple | None:
        padded = (None,) * offset + row if offset else row
        padded = padded + (None,) * (padded_width - len(padded))
        values = tuple(eval_scalar(e, padded, types) for e in exprs)
        return None if any(v is None for v in values) else values

    left_exprs = [k for k, _ in keys]
    right_exprs = [k for _, k in keys]

    def join(a_rows, b_rows, time_of, index=None):  # type: ignore[no-untyped-def]
        if index is None:
            index = defaultdict(list)
            for b in b_rows:
                key = key_of(b[0], right_exprs, left_width)
                if key is not None:
                    index[key].append(b)
        out: list = []
        tally = Tally(out)  # a cross join grows `out` by millions of rows a second
        for a in a_rows:
            key = key_of(a[0], left_exprs, 0)
            if key is None:
                continue
            matches = index.get(key, ())
            for b in matches:
                row = a[0] + b[0]
                if check(row, filters):
                    out.append((row, time_of(a, b), a[-1] * b[-1]))
            tally.add(len(matches) + 1)
        tally.settle()
        return out

    deltas: list[Update] = []
    if state is not None:
        # Each side arranged by its join key: the delta of one side meets
        # the other side's rows at the delta's keys only.
        sides = state.arrange_join(
            left,
            right,
            lambda r: key_of(r, left_exprs, 0),
            lambda r: key_of(r, right_exprs, left_width),
        )
        if sides is not None:
            left_at, right_at = sides
            if left.delta is not None:
                index = right_at([key_of(u[0], left_exprs, 0) for u in left.delta])
                deltas += [Update(*u) for u in join(left.delta, (), lambda a, b: a[1], index)]
            if right.delta is not None:
                keys_b = [key_of(u[0], right_exprs, left_width) for u in right.delta]
                olds = [a for rows in left_at(keys_b).values() for a in rows]
                deltas += [Update(*u) for u in join(olds, right.delta, lambda a, b: b[1])]
            left_old = right_old = None
        else:
            left_old, right_old = left.old, right.old
    else:
        left_old, right_old = left.old, right.old
    if left.delta is not None and right_old is not None:
        deltas += [Update(*u) for u in join(left.delta, right_old(), lambda a, b: a[1])]
    if left_old is not None and right.delta is not None:
        deltas += [Update(*u) for u in join(left_old(), right.delta, lambda a, b: b[1])]
    if left.delta is not None and right.delta is not None:
        deltas += [Update(*u) for u in join(left.delta, right.delta, lambda a, b: max(a[1], b[1]))]
    old = None
    if left.old is not None and right.old is not None:
        left_old, right_old = left.old, right.old
        old = _lazy(lambda: [(r, d) for r, _, d in join(left_old(), right_old(), lambda a, b: 0)])
    has_delta = left.delta is not None or right.delta is not None
    return LocalRendered(old, deltas if has_delta else None)


# --------------------------------------------------------------------- reduce
def _reduce(
    rendered: LocalRendered,
    types: tuple[ColumnType, ...],
    group_key: tuple[ScalarExpr, ...],
    aggregates: tuple[AggregateExpr, ...],
    ctx: LocalContext,
    mode: str,
) -> LocalRendered:
    """Recompute touched keys at every time the delta has for them (see
    render._reduce for the rule)."""

    def key_of(row: Row) -> tuple:
        return tuple(eval_scalar(k, row, types) for k in group_key)

    def output(key: tuple, rows: Counter) -> tuple[Row, int] | None:
        present = [(row, n) for row, n in rows.items() if n > 0]
        total = sum(rows.values())
        if total <= 0:
            return None
        if mode == "threshold":
            return key, total
        values = tuple(aggregate_values(a, present, types) for a in aggregates)
        return key + values, 1

    # The old rows with their keys, computed once for both uses below (the
    # old output and the touched groups' old rows): key expressions are
    # evaluated per row in Python, and a step may need both.
    source = rendered.old
    keyed_old = (
        None
        if source is None
        else cache(lambda: charge_list([(key_of(r), r, d) for r, d in source()]))
    )

    def old_rows() -> OldRows:
        assert keyed_old is not None
        groups: dict[tuple, Counter] = defaultdict(Counter)
        for key, row, diff in keyed_old():
            groups[key][row] += diff
        out = []
        for key, rows in groups.items():
            value = output(key, rows)
            if value is not None:
                out.append(value)
        return out

    old = None if rendered.old is None else _lazy(old_rows)
    # Arranged by the group key: the touched groups' rows come from there.
    arranged = None if ctx.state is None else ctx.state.arrange(rendered.delta, key_of, keyed_old)
    if rendered.delta is None:
        return LocalRendered(old, None)
    by_key: dict[tuple, list[Update]] = defaultdict(list)
    for update in rendered.delta:
        by_key[key_of(update.row)].append(update)
    before: dict[tuple, Counter] = defaultdict(Counter)
    if arranged is not None:
        for key, rows in arranged(list(by_key)).items():
            for row, diff in rows:
                before[key][row] += diff
    elif keyed_old is not None:
        for key, row, diff in keyed_old():
            if key in by_key:
                before[key][row] += diff
    changes: list[Update] = []
    for key, updates in by_key.items():
        rows = before[key]
        previous = output(key, rows)
        for t in sorted({u.time for u in updates}):
            for u in updates:
                if u.time == t:
                    rows[u.row] += u.diff
            current = output(key, rows)
            if current == previous:
                continue
            if previous is not None:
                changes.append(Update(previous[0], t, -previous[1]))
            if current is not None:
                changes.append(Update(current[0], t, current[1]))
            previous = current
    return LocalRendered(old, changes)
