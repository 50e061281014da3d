"""Rendering a plan in-process: the delta rules (delta_rules.py) over the
in-process backend (local_backend.py), for one step of a dataflow.

`render_local(expr, ctx)` plans `expr` (plan.py) and returns its old
contents (computed when first asked) and delta; `ctx.rules` gets each
operator's rule, `ctx.errors` the step's error updates.
"""

from __future__ import annotations

from coordinator_lib.compute import delta_rules
from coordinator_lib.compute.local_backend import (
    DeltaRows,
    LocalBackend,
    LocalContext,
    LocalRendered,
    OldRows,
)
from coordinator_lib.expr.relation import RelationExpr


def render_local(expr: RelationExpr, ctx: LocalContext) -> LocalRendered:
    """`expr`'s (old, delta) for the step `ctx` describes."""
    out = delta_rules.render(expr, LocalBackend(ctx))
    return LocalRendered(
        None if out.old is None else out.old.get,
        None if out.delta is None else out.delta.get(),
    )


__all__ = ["DeltaRows", "LocalContext", "LocalRendered", "OldRows", "render_local"]
