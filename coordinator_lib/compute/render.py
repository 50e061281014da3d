"""Rendering a plan on Spark: the delta rules (delta_rules.py) over the
Spark backend (spark_backend.py), for one step of a dataflow.

`render(expr, ctx)` plans `expr` (plan.py) and returns its (old, delta) as
lazy DataFrames (spark_frames.py); `ctx.rules` gets each operator's rule,
`ctx.errors` the step's error updates.
"""

from __future__ import annotations

from coordinator_lib.compute import delta_rules
from coordinator_lib.compute.spark_backend import Rendered, SparkBackend, StepContext
from coordinator_lib.compute.spark_frames import (
    DIFF,
    POINT,
    TIME,
    consolidate_delta,
    data_columns,
    empty_frame,
)
from coordinator_lib.expr.relation import RelationExpr


def render(expr: RelationExpr, ctx: StepContext) -> Rendered:
    """`expr`'s (old, delta) for the step `ctx` describes."""
    return delta_rules.render(expr, SparkBackend(ctx))


__all__ = [
    "DIFF",
    "POINT",
    "TIME",
    "Rendered",
    "StepContext",
    "consolidate_delta",
    "data_columns",
    "empty_frame",
    "render",
]
