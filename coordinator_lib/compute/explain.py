"""EXPLAIN for maintained views: each operator marked with the rule of the
step-plan node it belongs to (plan.py), the plan the delta rules run.

    Reduce group_by=[#4] aggregates=[max(#1)] [incremental: touched keys]
      Join on=(#0 = #3) [incremental]
        Get materialize.public.t [source]
        Get materialize.public.u [source]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from coordinator_lib.compute.plan import operator_rules, plan_for
from coordinator_lib.compute.rules import RULES
from coordinator_lib.expr.explain import explain
from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.repr.global_id import GlobalId


def annotate(expr: RelationExpr) -> str:
    """The mark for `expr`'s operator: `[incremental]`, `[incremental: touched
    keys]`, `[recomputed]`, `[source]`, or `[unsupported]` when the renderer
    has no rule for it. (`expr.explain.explain` puts the space before it.)"""
    rule = RULES.get(type(expr))
    return f"[{rule.value if rule is not None else 'unsupported'}]"


def view_annotator(expr: RelationExpr) -> Callable[[RelationExpr], str]:
    """Each operator of the view `expr` marked with its step's rule in the
    view's plan (plan.py). The plan differs from `annotate` in one place:
    the Reduce of an accumulable view (COUNT/SUM under only linear
    operators, no scalar that can fail) is `[incremental: accumulated]`,
    how its Spark steps maintain it (in-process steps before its first
    Spark step recompute the touched keys)."""
    try:
        rules = operator_rules(plan_for(expr))
    except TypeError:  # an operator with no rule: each line says `[unsupported]`
        rules = {}

    def mark(node: RelationExpr) -> str:
        rule = rules.get(id(node))
        return annotate(node) if rule is None else f"[{rule.value}]"

    return mark


def explain_view(expr: RelationExpr, names: Mapping[GlobalId, str] | None = None) -> str:
    """The operator tree of a view's plan, each line marked (`view_annotator`)."""
    return explain(expr, view_annotator(expr), names)
