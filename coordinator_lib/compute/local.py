"""Rendering a plan in-process: the delta rules (delta_rules.py) over the
in-process backend (local_backend.py), for one step of a dataflow, or for a
one-off query streamed to its reader.

`render_local(expr, ctx)` plans `expr` (plan.py) and returns its old
contents (computed when first asked) and delta; `ctx.rules` gets each
operator's rule, `ctx.errors` the step's error updates.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

from coordinator_lib.compute import delta_rules, plan
from coordinator_lib.compute.budget import held
from coordinator_lib.compute.error_collection import raise_first
from coordinator_lib.compute.local_backend import (
    DeltaRows,
    LocalBackend,
    LocalContext,
    LocalRendered,
    OldIterable,
    OldRows,
    as_list,
)
from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.repr.update import Row, Update, consolidate_rows

SORTED_UP_TO = 10_000
"""A one-off result of fewer rows is consolidated and sorted, as every
result was when each was built whole (small results keep that order and
fail before their first row); a larger one is sent in the order it is
computed, as it is computed."""


def render_local(expr: RelationExpr, ctx: LocalContext) -> LocalRendered:
    """`expr`'s (old, delta) for the step `ctx` describes."""
    out = delta_rules.render(expr, LocalBackend(ctx))
    old, delta = out.old, out.delta
    return LocalRendered(
        None if old is None else lambda: as_list(old.get()),
        None if delta is None else as_list(delta.get()),
    )


def stream_local(expr: RelationExpr, ctx: LocalContext) -> Iterable[tuple[Row, int]]:
    """`expr`'s rows `(row, multiplicity)` at `ctx.lower`, a one-off query
    (`ctx`: hydrating that one time, `streaming`). Keyed operators run now;
    the rows above them, past the first `SORTED_UP_TO`, as the result is
    read. The first error (`ctx.errors`) raises as soon as it is found."""
    step = plan.plan_for(expr)
    out = delta_rules.render_step(step, LocalBackend(ctx), {})
    errors = ctx.errors
    if out.delta is None:
        raise_first(errors)
        return []
    rows = ((u[0], u[2]) for u in out.delta.get())
    if _may_retract(step):  # its retractions must meet their rows before anything is sent
        consolidated = consolidate_rows(held(rows))
        raise_first(errors)
        return consolidated
    first = list(itertools.islice(rows, SORTED_UP_TO))
    raise_first(errors)
    if len(first) < SORTED_UP_TO:
        return consolidate_rows(first)
    return itertools.chain(first, _failing_at_first_error(rows, errors))


def _failing_at_first_error(
    rows: Iterator[tuple[Row, int]], errors: list[Update]
) -> Iterator[tuple[Row, int]]:
    for row in rows:
        if errors:
            raise_first(errors)
        yield row
    raise_first(errors)


def _may_retract(step: plan.Step) -> bool:
    """Whether a one-off result may hold retractions: a Negate or a
    negative constant not under a keyed operator (whose output at one time,
    from nothing, is insertions only)."""
    seen: set[int] = set()
    pending = [step]
    while pending:
        node = pending.pop()
        if id(node) in seen or isinstance(node, delta_rules.Keyed):
            continue
        seen.add(id(node))
        if isinstance(node, plan.Negate):
            return True
        if isinstance(node, plan.Constant) and any(diff < 0 for _, diff in node.rows):
            return True
        pending.extend(node.inputs())
    return False


__all__ = [
    "DeltaRows",
    "LocalContext",
    "LocalRendered",
    "OldIterable",
    "OldRows",
    "render_local",
    "stream_local",
]
