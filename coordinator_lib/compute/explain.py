"""EXPLAIN for maintained views: each operator marked with the rule of the
step-plan node it belongs to (plan.py), the plan the delta rules run.

    Reduce group_by=[#4] aggregates=[max(#1)] [incremental: touched keys]
      Join on=(#0 = #3) [incremental]
        Get materialize.public.t [source]
        Get materialize.public.u [source]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from coordinator_lib.compute import plan as steps
from coordinator_lib.compute.plan import operator_rules, plan_for
from coordinator_lib.compute.rules import RULES
from coordinator_lib.expr.explain import columns_list, describe, explain, format_scalar
from coordinator_lib.expr.relation import Reduce, RelationExpr, TopK, Window
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


def explain_steps(expr: RelationExpr, names: Mapping[GlobalId, str] | None = None) -> str:
    """EXPLAIN PHYSICAL PLAN: the step plan (plan.py) the delta rules run,
    one step per line, inputs indented: merged map-filter-projects as one
    `Linear` step, the Reduce's kind, each step's rule and the state an
    in-process step keeps for it (compute/arranged.py)."""
    try:
        root = plan_for(expr)
    except TypeError as error:  # an operator no rule renders
        return f"<no step plan: {error}>"
    lines: list[str] = []

    def visit(step: steps.Step, depth: int) -> None:
        lines.append("  " * depth + _step_line(step, names))
        for child in step.inputs():
            visit(child, depth + 1)

    visit(root, 0)
    return "\n".join(lines)


def _step_line(step: steps.Step, names: Mapping[GlobalId, str] | None) -> str:
    if isinstance(step, steps.Linear):
        text = "Linear " + "; ".join(describe(op, names) for op in step.applied())
    else:
        text = describe(step.expr, names)
    if isinstance(step, steps.Reduce):
        text += f" kind={step.kind.value}"
    return f"{text} [{step.rule.value}] state={_state(step)}"


def _state(step: steps.Step) -> str:
    """What the step keeps arranged between steps, by which key."""
    node = step.expr
    if isinstance(step, steps.Join):
        return "each input by its join key"
    if isinstance(step, steps.Reduce) and isinstance(node, Reduce):
        keys = ", ".join(format_scalar(k) for k in node.group_key)
        if step.accumulators:  # a keyless Reduce has one group, key []
            kept = ["accumulators"]
            if any(a.distinct for a in node.aggregates):
                kept.append("DISTINCT values with multiplicities")
            if any(a.func in steps.ORDERED_AGGREGATES for a in node.aggregates):
                kept.append("MIN/MAX values in order")
            listed = ", ".join(kept[:-1]) + " and " + kept[-1] if len(kept) > 1 else kept[0]
            return f"{listed} by group key [{keys}]"
        values = columns_list(sorted(step.value_columns))
        return f"values [{values}] with multiplicities by group key [{keys}]"
    if isinstance(step, steps.TemporalFilter):
        return "pending insertions and retractions by time"
    if isinstance(step, steps.Distinct | steps.Threshold):
        return "input by row"
    if isinstance(step, steps.TopK) and isinstance(node, TopK):
        order = ", ".join(repr(k) for k in node.order_key)
        return f"input by group key [{columns_list(node.group_key)}] in order [{order}]"
    if isinstance(step, steps.Window) and isinstance(node, Window):
        return f"input by partition key [{columns_list(node.partition_key)}]"
    return "none"
