"""The delta rules, written once over a small backend interface.

A step advances a view from `lower` (u0) to `upper` (u1). Every step of the
plan (plan.py) turns its inputs' (old, delta) into its own (old, delta):

- old: the contents at u0 - 1, rows with a multiplicity (not necessarily
  consolidated);
- delta: the updates at their exact times in [u0, u1).

The rules (docs/architecture.md, "How SQL becomes a plan"):

- Linear (map-filter-project), FlatMap, Union, Negate: applied to old and delta
  alike; a delta row a scalar fails on becomes an error update (its error
  was taken in before when it is in old, so there it only leaves).
- Join, input by input: dA x B_old + A_old x dB + dA x dB, each output at
  max(tA, tB), with old timed at u0 - 1 (so the first two terms keep the
  delta's times); old is A_old x B_old.
- Reduce / Distinct / Threshold / TopK / Window: old is every group
  evaluated; the delta recomputes only the groups the delta touches, from
  their old rows, at u0 - 1 and at every time the delta carries for them,
  and emits the differences, so the output is exact at every time.
  A group whose aggregate fails on its own (a SUM past its type while each
  value fits) has an error in place of its row: the step's errors get an
  update wherever the group starts or stops failing, as Materialize's
  reduce sends it to errs, and old leaves the group out (its error was
  taken in before).
  Reading a touched group's old rows is one primitive
  (`rows_at_touched_keys`), so a backend may answer it from durable
  per-operator state (an arrangement) instead of its input's old contents.
- TemporalFilter: old is the rows present at u0 - 1; the delta is each
  update's insertion at max(t, L) and retraction at U, plus the old rows'
  L or U that fall in the step (compute/temporal.py). Those are one
  primitive (`temporal_due`), so a backend may keep the changes due past
  a step arranged by time and read back only those the step reaches.

Hydration at `as_of` is the same rules with every old empty and each
input's snapshot a delta at `as_of`. `None` is a collection known to be
empty, so no work is planned for it. A backend (spark_backend.py on
DataFrames, local_backend.py on Python rows) implements only `Backend`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from coordinator_lib.compute import plan
from coordinator_lib.compute.join_plan import JoinStep
from coordinator_lib.compute.rules import rule_for
from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.repr.global_id import GlobalId

C = TypeVar("C")

# A keyed step: its rows grouped by the key it recomputes (Reduce, Distinct,
# Threshold: the group key; TopK: its group; Window: its partition).
Keyed = plan.Reduce | plan.Distinct | plan.Threshold | plan.TopK | plan.Window


@dataclass
class Pair(Generic[C]):
    """A step's contents before the step (`old`) and its changes during it."""

    old: C | None
    delta: C | None


class Backend(Protocol[C]):
    """The primitives a backend implements over its collection type `C`.

    A collection is either untimed (old: rows and multiplicities) or timed
    (a delta: rows, times and multiplicities); every primitive keeps that,
    except `join_matches`, which times old rows."""

    lower: int  # the step's [lower, upper)
    upper: int
    hydrating: bool  # every old is empty; inputs' snapshots are deltas at lower

    def record(self, operator: str, rule: str) -> None:
        """Note that `operator` is maintained by `rule` (EXPLAIN's words)."""

    def get(self, id: GlobalId) -> Pair[C]:
        """An input's (old, delta)."""

    def stateful_input(self, step: plan.Step, pair: Pair[C]) -> Pair[C]:
        """`pair`, `step`'s rendering, as the input of a stateful operator
        (a join, a keyed step, a temporal filter): as is, or with its old
        contents computed elsewhere (Spark hydrating the in-process
        arrangements: arranged.hydrate)."""

    def constant(self, step: plan.Constant, time: int | None) -> C | None:
        """Fixed rows, untimed or at `time`; None when there are none."""

    def map_filter_project(self, c: C, step: plan.Linear) -> C:
        """`step.ops` on each row, innermost first; a row an op fails on
        leaves (in a timed collection, as an error update)."""

    def flat_map(self, c: C, step: plan.FlatMap) -> C:
        """Each row followed by each value of its table function, one row each."""

    def negate(self, c: C) -> C: ...

    def union(self, cs: list[C]) -> C: ...

    def consolidate(self, c: C) -> C:
        """A delta with its updates of one row at one time summed (zeros
        dropped), where the backend holds it whole; else `c`."""

    def join_matches(
        self, left: Pair[C], right: Pair[C], join: plan.Join, step: JoinStep
    ) -> tuple[C | None, C | None]:
        """The old rows a join `step`'s delta terms read, timed at lower - 1:
        (the left's that `right.delta` may match, the right's that
        `left.delta` may match). All old rows, or, from an arrangement of
        each input by its join key, those at the other delta's keys."""

    def join_filter(self, c: C, join: plan.Join) -> C:
        """The first input of `join` without the rows its equalities reject."""

    def equi_join(self, left: C, right: C, join: plan.Join, step: JoinStep) -> C:
        """Rows of `left` and `right` (columns from `step.left_width`)
        whose `step.keys` are equal and not NULL and that pass
        `step.filters`; diff the product, time the later of the two (both
        timed) or none (both untimed)."""

    def check_scalars(self, c: C, node: plan.Reduce) -> C:
        """Without the rows `node`'s key or arguments fail on (a timed
        collection's failures are error updates)."""

    def key_by(self, c: C, node: Keyed) -> C:
        """Rows with the key `node` groups them by."""

    def group_outputs(self, keyed_old: C, node: Keyed) -> C:
        """Every group's output, evaluated from its old rows (untimed);
        none for a group whose aggregate fails."""

    def rows_at_touched_keys(
        self, keyed_old: C | None, keyed_delta: C | None, node: Keyed
    ) -> C | None:
        """The old rows of the groups `keyed_delta` touches (untimed): from
        `keyed_old`, or from an arrangement of the input by `node`'s key."""

    def group_changes(self, touched_old: C | None, keyed_delta: C, node: Keyed) -> C:
        """Each touched group's output at lower - 1 and at each time of the
        delta (its old rows plus the delta up to that time), as updates:
        at each time, that time's output minus the one before. A failing
        group's error stands for its row: its changes are the step's error
        updates, not data."""

    def temporal_present(self, old: C, node: plan.TemporalFilter, time: int) -> C:
        """The rows of `old` that the bounds let be present at `time`."""

    def temporal_changes(self, c: C, node: plan.TemporalFilter) -> C:
        """The insertions (at max(t, L), an untimed row's t being -inf) and
        retractions (at U) of `c`'s rows that fall in [lower, upper)."""

    def temporal_due(self, old: C | None, delta: C | None, node: plan.TemporalFilter) -> C | None:
        """The old rows' insertions and retractions that fall in [lower,
        upper) (none when hydrating): `temporal_changes(old)`, or read from
        an arrangement by time of the changes earlier steps found due later
        (which takes in `delta`'s changes due at or past upper)."""


Memo = dict[int, Pair[C]]


def render_step(step: plan.Step, b: Backend[C], memo: Memo[C] | None = None) -> Pair[C]:
    """`step`'s (old, delta) for one step of the dataflow. With `memo`, a
    shared step (plan.py) is rendered once for all its parents (a one-off
    query's global aggregate reads its Reduce twice); without, once each."""
    if memo is None:
        return _render_step(step, b, None)
    found = memo.get(id(step))
    if found is None:
        found = memo[id(step)] = _render_step(step, b, memo)
    return found


def _render_step(step: plan.Step, b: Backend[C], memo: Memo[C] | None) -> Pair[C]:
    for op in step.operators:
        b.record(type(op).__name__, rule_for(op).value)
    if isinstance(step, plan.Get):
        return b.get(step.id)
    if isinstance(step, plan.Constant):
        return _constant(step, b)
    if isinstance(step, plan.Linear):
        return _each(render_step(step.input, b, memo), lambda c: b.map_filter_project(c, step))
    if isinstance(step, plan.FlatMap):
        return _each(render_step(step.input, b, memo), lambda c: b.flat_map(c, step))
    if isinstance(step, plan.Negate):
        return _each(render_step(step.input, b, memo), b.negate)
    if isinstance(step, plan.Union):
        parts = [render_step(child, b, memo) for child in step.inputs_]
        return Pair(_union(b, [p.old for p in parts]), _union(b, [p.delta for p in parts]))
    if isinstance(step, plan.Join):
        return _join(step, b, memo)
    if isinstance(step, Keyed):
        return _touched_keys(step, _stateful_input(step.input, b, memo), b)
    if isinstance(step, plan.TemporalFilter):
        return _temporal(step, _stateful_input(step.input, b, memo), b)
    raise TypeError(f"no rendering for {type(step.expr).__name__}")


def _stateful_input(step: plan.Step, b: Backend[C], memo: Memo[C] | None) -> Pair[C]:
    return b.stateful_input(step, render_step(step, b, memo))


def render(expr: RelationExpr, b: Backend[C]) -> Pair[C]:
    """Plan `expr` (plan.py) and render it on `b`."""
    return render_step(plan.plan_for(expr), b)


# ----------------------------------------------------------------- the rules
def _each(pair: Pair[C], op: _Op[C]) -> Pair[C]:
    """A linear rule: the same on old and delta."""
    return Pair(
        None if pair.old is None else op(pair.old),
        None if pair.delta is None else op(pair.delta),
    )


class _Op(Protocol[C]):
    def __call__(self, c: C, /) -> C: ...


def _union(b: Backend[C], cs: list[C | None]) -> C | None:
    present = [c for c in cs if c is not None]
    if not present:
        return None
    return present[0] if len(present) == 1 else b.union(present)


def _constant(step: plan.Constant, b: Backend[C]) -> Pair[C]:
    """Fixed rows are a delta at as_of when hydrating, else old contents."""
    if b.hydrating:
        return Pair(None, b.constant(step, b.lower))
    return Pair(b.constant(step, None), None)


def _join(step: plan.Join, b: Backend[C], memo: Memo[C] | None) -> Pair[C]:
    parts = [_stateful_input(child, b, memo) for child in step.inputs_]
    joined = _each(parts[0], lambda c: b.join_filter(c, step)) if step.first else parts[0]
    for join_step, part in zip(step.steps, parts[1:], strict=True):
        joined = _binary_join(joined, part, step, join_step, b)
    return joined


def _binary_join(
    left: Pair[C], right: Pair[C], join: plan.Join, step: JoinStep, b: Backend[C]
) -> Pair[C]:
    """dA x B_old + A_old x dB + dA x dB; old A_old x B_old."""
    left_matches, right_matches = b.join_matches(left, right, join, step)
    terms: list[C | None] = []
    if left.delta is not None and right_matches is not None:
        terms.append(b.equi_join(left.delta, right_matches, join, step))
    if left_matches is not None and right.delta is not None:
        terms.append(b.equi_join(left_matches, right.delta, join, step))
    if left.delta is not None and right.delta is not None:
        terms.append(b.equi_join(left.delta, right.delta, join, step))
    old = None
    if left.old is not None and right.old is not None:
        old = b.equi_join(left.old, right.old, join, step)
    delta = _union(b, terms)
    # Summed before the next input: an update and its retraction (a value
    # relation's key read by two of its inputs) each meet the next input's
    # delta, so an unsummed delta doubled at every input of a wide join
    # (2^n updates of a 17-input join after one DELETE).
    return Pair(old, None if delta is None else b.consolidate(delta))


def _touched_keys(step: Keyed, inner: Pair[C], b: Backend[C]) -> Pair[C]:
    """Recompute the groups the delta touches at every time it has for them."""
    if isinstance(step, plan.Reduce):
        inner = _each(inner, lambda c: b.check_scalars(c, step))
    keyed = _each(inner, lambda c: b.key_by(c, step))
    old = None if keyed.old is None else b.group_outputs(keyed.old, step)
    touched_old = b.rows_at_touched_keys(keyed.old, keyed.delta, step)
    if keyed.delta is None:
        return Pair(old, None)
    return Pair(old, b.group_changes(touched_old, keyed.delta, step))


def _temporal(step: plan.TemporalFilter, inner: Pair[C], b: Backend[C]) -> Pair[C]:
    """Rows present from max(t, L) until U: the old rows present at lower - 1;
    the changes from the delta and, unless hydrating, from the old rows."""
    old = None if inner.old is None else b.temporal_present(inner.old, step, b.lower - 1)
    changes = [b.temporal_due(inner.old, inner.delta, step)]
    if inner.delta is not None:
        changes.append(b.temporal_changes(inner.delta, step))
    return Pair(old, _union(b, changes))
