"""EXPLAIN for maintained views: each operator marked with how a step
maintains it, read from the renderer's own rule table (rules.py).

    Reduce group_by=[#4] aggregates=[max(#1)] [incremental: touched keys]
      Join on=(#0 = #3) [incremental]
        Get materialize.public.t [source]
        Get materialize.public.u [source]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from coordinator_lib.compute.accumulate import accumulate_plan
from coordinator_lib.compute.rules import RULES, Rule
from coordinator_lib.compute.spark_errors import plan_can_fail
from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.sql.explain import explain


def annotate(expr: RelationExpr) -> str:
    """The mark for `expr`'s operator: `[incremental]`, `[incremental: touched
    keys]`, `[recomputed]`, `[source]`, or `[unsupported]` when the renderer
    has no rule for it. (`sql.explain.explain` puts the space before it.)"""
    rule = RULES.get(type(expr))
    return f"[{rule.value if rule is not None else 'unsupported'}]"


def view_annotator(expr: RelationExpr) -> Callable[[RelationExpr], str]:
    """`annotate` for the operators of the view `expr`, except that the
    Reduce of an accumulating view (compute/accumulate.py: COUNT/SUM under
    only linear operators) is marked `[incremental: accumulated]`: that is
    how its Spark steps maintain it (in-process steps before its first Spark
    step recompute the touched keys). A view whose scalars can fail keeps
    an error collection, which the accumulating path does not: its Reduce
    recomputes touched keys, and says so."""
    plan = None if plan_can_fail(expr) else accumulate_plan(expr)

    def mark(node: RelationExpr) -> str:
        if plan is not None and node is plan.reduce:
            return f"[{Rule.ACCUMULATED.value}]"
        return annotate(node)

    return mark


def explain_view(expr: RelationExpr, names: Mapping[GlobalId, str] | None = None) -> str:
    """The operator tree of a view's plan, each line marked (`view_annotator`)."""
    return explain(expr, view_annotator(expr), names)
