"""Which maintenance rule the renderer uses for each operator.

One table, read by the step plan (plan.py: each step's rule, which EXPLAIN
prints, and it refuses operators missing from it) and by the delta rules
(delta_rules.py records each operator's rule as it renders it), so what
EXPLAIN says and what a step does cannot drift apart. No Spark here:
EXPLAIN must not need a session.
"""

from __future__ import annotations

from enum import StrEnum

from coordinator_lib.expr.relation import (
    Constant,
    Distinct,
    Filter,
    FlatMap,
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
from coordinator_lib.expr.temporal import TemporalFilter


class Rule(StrEnum):
    """How an operator's output changes are computed during a step."""

    # Reads a collection (Get) or fixed rows (Constant): nothing to maintain.
    SOURCE = "source"
    # Linear operators apply to the delta as is; Join combines
    # dA x B_old + A_old x dB + dA x dB.
    INCREMENTAL = "incremental"
    # Reduce / Distinct / Threshold / TopK / Window: only the keys (groups,
    # partitions) the delta touches are recomputed, at every time the delta
    # carries for them.
    TOUCHED_KEYS = "incremental: touched keys"
    # A COUNT/SUM Reduce under only linear operators, stepped on Spark: per-group
    # accumulators in a state shard (compute/accumulate.py). It depends on the
    # whole plan, not the operator, so it is not in RULES (see explain.py).
    ACCUMULATED = "incremental: accumulated"
    # A temporal filter (mz_now() bounds): each row's insertion at max(t, L)
    # and retraction at U, from the delta and, for times the step reaches,
    # from the input's old contents (compute/temporal.py).
    TEMPORAL = "incremental: temporal"
    # Evaluate at the new time and diff against the last output (no operator
    # uses it today; kept so EXPLAIN has a word for it).
    RECOMPUTED = "recomputed"


RULES: dict[type[RelationExpr], Rule] = {
    Get: Rule.SOURCE,
    Constant: Rule.SOURCE,
    Filter: Rule.INCREMENTAL,
    Map: Rule.INCREMENTAL,
    FlatMap: Rule.INCREMENTAL,
    Project: Rule.INCREMENTAL,
    Negate: Rule.INCREMENTAL,
    Union: Rule.INCREMENTAL,
    Join: Rule.INCREMENTAL,
    Reduce: Rule.TOUCHED_KEYS,
    Distinct: Rule.TOUCHED_KEYS,
    Threshold: Rule.TOUCHED_KEYS,
    TopK: Rule.TOUCHED_KEYS,
    Window: Rule.TOUCHED_KEYS,
    TemporalFilter: Rule.TEMPORAL,
}


def rule_for(expr: RelationExpr) -> Rule:
    """The rule the renderer uses for `expr`'s operator; TypeError if none."""
    try:
        return RULES[type(expr)]
    except KeyError:
        raise TypeError(f"no rendering for {type(expr).__name__}") from None
