"""How an n-ary Join is executed as a left fold of binary joins.

The step plan (plan.py) carries it for the delta rules (delta_rules.py)
on either backend: for each input after the first, the equi-join key pairs (an
expression over the columns joined so far, one over the new input's) and
the residual equalities to filter on. Equivalence class members are checked
once, as soon as every column they use is available.
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator_lib.expr.relation import Join
from coordinator_lib.expr.scalar import ScalarExpr


@dataclass(frozen=True)
class JoinStep:
    """Join the columns [0, left_width) so far with the next input."""

    left_width: int
    width: int  # columns available after this step
    keys: tuple[tuple[ScalarExpr, ScalarExpr], ...]
    filters: tuple[tuple[ScalarExpr, ScalarExpr], ...]


def _within(expr: ScalarExpr, width: int) -> bool:
    return all(c < width for c in expr.columns())


def _equalities(
    classes: tuple[tuple[ScalarExpr, ...], ...], before: int, now: int
) -> tuple[list[tuple[ScalarExpr, ScalarExpr]], list[tuple[ScalarExpr, ScalarExpr]]]:
    """Key pairs and filters for members that become computable between
    widths `before` and `now`."""
    keys: list[tuple[ScalarExpr, ScalarExpr]] = []
    filters: list[tuple[ScalarExpr, ScalarExpr]] = []
    for cls in classes:
        members = [m for m in cls if _within(m, now)]
        new = [m for m in members if not _within(m, before)]
        if len(members) < 2 or not new:
            continue
        old = [m for m in members if _within(m, before)]
        right_only = [m for m in new if m.columns() and min(m.columns()) >= before]
        anchor = old[0] if old else members[0]
        used = {anchor}
        if old and right_only and before > 0:
            keys.append((anchor, right_only[0]))
            used.add(right_only[0])
        for m in members:
            if m not in used and (m in new or anchor in new):
                filters.append((anchor, m))
    return keys, filters


def first_filters(join: Join) -> tuple[tuple[ScalarExpr, ScalarExpr], ...]:
    """Equalities among members computable from the first input alone."""
    width = join.inputs_[0].desc.arity
    _, filters = _equalities(join.equivalences, 0, width)
    return tuple(filters)


def join_steps(join: Join) -> list[JoinStep]:
    offsets = join.input_offsets()
    steps = []
    width = join.inputs_[0].desc.arity
    for child, offset in zip(join.inputs_[1:], offsets[1:], strict=True):
        new_width = offset + child.desc.arity
        keys, filters = _equalities(join.equivalences, width, new_width)
        steps.append(JoinStep(width, new_width, tuple(keys), tuple(filters)))
        width = new_width
    return steps
