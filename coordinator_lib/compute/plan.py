"""The step plan: how each part of a view is maintained, decided once.

As Materialize lowers MIR to a plan before rendering, `plan_for` lowers a
relation expression (expr/relation.py) to steps, each with the rule a step
of the dataflow runs it by (rules.py): consecutive Filter / Map / Project
become one `Linear` map-filter-project, a Join carries its join steps
(join_plan.py), a Reduce its kind (accumulable COUNT/SUM, or touched keys).
The delta rules (delta_rules.py) walk this plan on either backend, and
EXPLAIN (explain.py) prints its rules, so what EXPLAIN says is what runs.
No Spark here: EXPLAIN and the in-process engine must not need a session.

Shared subplans (nested subqueries reuse one on several branches) lower to
one step object, so planning stays linear in the plan's size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

from coordinator_lib.compute.join_plan import JoinStep, first_filters, join_steps
from coordinator_lib.compute.rules import Rule, rule_for
from coordinator_lib.expr import relation as rel
from coordinator_lib.expr.scalar import (
    BinaryFunc,
    CallBinary,
    RaiseError,
    ScalarExpr,
)
from coordinator_lib.expr.temporal import TemporalFilter as TemporalFilterExpr
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import ColumnType, RelationDesc, ScalarType

LinearOp = rel.Filter | rel.Map | rel.Project
LINEAR = (rel.Project, rel.Map, rel.Filter)


class ReduceKind(StrEnum):
    """How a Reduce's changes are computed."""

    # COUNT / SUM (not DISTINCT) at the top of a view, under only linear
    # operators, with no scalar that can fail: Spark steps keep per-group
    # accumulators (accumulate.py); in-process steps recompute touched keys.
    ACCUMULABLE = "accumulable"
    # Recompute the groups the delta touches at every time it carries.
    TOUCHED_KEYS = "touched keys"


@dataclass(frozen=True, eq=False)
class Step:
    """A node of the plan. `expr` is the outermost relation operator it
    stands for; `operators` all of them, outermost first (one but for Linear)."""

    expr: rel.RelationExpr

    @property
    def operators(self) -> tuple[rel.RelationExpr, ...]:
        return (self.expr,)

    @property
    def rule(self) -> Rule:
        """The rule EXPLAIN shows for this step's operators."""
        return rule_for(self.expr)

    def inputs(self) -> tuple[Step, ...]:
        return ()


@dataclass(frozen=True, eq=False)
class Get(Step):
    id: GlobalId


@dataclass(frozen=True, eq=False)
class Constant(Step):
    rows: tuple[tuple[tuple[object, ...], int], ...]


@dataclass(frozen=True, eq=False)
class Unary(Step):
    input: Step

    def inputs(self) -> tuple[Step, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class Linear(Unary):
    """One map-filter-project: `ops` applied innermost first (`ops[-1]`),
    each row dropped (or, in a delta, turned into an error) by the first
    op that fails on it."""

    ops: tuple[LinearOp, ...]

    @property
    def operators(self) -> tuple[rel.RelationExpr, ...]:
        return self.ops

    def applied(self) -> Iterator[LinearOp]:
        return reversed(self.ops)


@dataclass(frozen=True, eq=False)
class FlatMap(Unary):
    """A table function per row (expr/table_functions.py): linear, as Map."""


@dataclass(frozen=True, eq=False)
class Negate(Unary):
    pass


@dataclass(frozen=True, eq=False)
class Union(Step):
    inputs_: tuple[Step, ...]

    def inputs(self) -> tuple[Step, ...]:
        return self.inputs_


@dataclass(frozen=True, eq=False)
class Join(Step):
    """A left fold of binary joins: `first` filters the first input, then
    each `steps[i]` joins what is joined so far with `inputs_[i + 1]`."""

    inputs_: tuple[Step, ...]
    first: tuple[tuple[ScalarExpr, ScalarExpr], ...]
    steps: tuple[JoinStep, ...]
    types: tuple[ColumnType, ...]
    offsets: tuple[int, ...]

    def inputs(self) -> tuple[Step, ...]:
        return self.inputs_


@dataclass(frozen=True, eq=False)
class Reduce(Unary):
    kind: ReduceKind

    @property
    def rule(self) -> Rule:
        if self.kind is ReduceKind.ACCUMULABLE:
            return Rule.ACCUMULATED
        return Rule.TOUCHED_KEYS

    @property
    def accumulators(self) -> bool:
        """Whether an in-process step keeps each group as accumulators (its
        multiplicity; per COUNT/SUM, the sum of value x diff and the count
        of non-NULL values) and each MIN/MAX's values in order, instead of
        its rows: every aggregate is a MIN, a MAX, or a COUNT or SUM (a
        DISTINCT one with its values' multiplicities arranged too; a float
        sum kept exact, compute/float_sum.py, so it equals a recompute's)."""
        node = self.expr
        assert isinstance(node, rel.Reduce)
        return bool(node.aggregates) and all(
            a.func in ORDERED_AGGREGATES
            or a.func in (rel.AggregateFunc.COUNT, rel.AggregateFunc.SUM)
            for a in node.aggregates
        )

    @property
    def value_columns(self) -> frozenset[int]:
        """The input columns its aggregates read. An in-process step keeps a
        group as these values with their multiplicities (the other columns
        NULL), not its rows: a touched group of many rows and few distinct
        values (count(DISTINCT s), string_agg, a float sum) reads only those."""
        node = self.expr
        assert isinstance(node, rel.Reduce)
        return frozenset(c for a in node.aggregates for c in a.expr.columns())


ORDERED_AGGREGATES = (rel.AggregateFunc.MIN, rel.AggregateFunc.MAX)


@dataclass(frozen=True, eq=False)
class Distinct(Unary):
    pass


@dataclass(frozen=True, eq=False)
class Threshold(Unary):
    pass


@dataclass(frozen=True, eq=False)
class TopK(Unary):
    pass


@dataclass(frozen=True, eq=False)
class Window(Unary):
    pass


@dataclass(frozen=True, eq=False)
class TemporalFilter(Unary):
    pass


_UNARY: dict[type[rel.RelationExpr], type[Unary]] = {
    rel.Negate: Negate,
    rel.Distinct: Distinct,
    rel.Threshold: Threshold,
    rel.FlatMap: FlatMap,
    rel.TopK: TopK,
    rel.Window: Window,
    TemporalFilterExpr: TemporalFilter,
}


def plan_for(expr: rel.RelationExpr) -> Step:
    """The step plan of `expr` (TypeError for an operator with no rule)."""
    accumulable = accumulate_plan(expr)
    if accumulable is not None and plan_can_fail(expr):
        accumulable = None
    memo: dict[int, Step] = {}

    def lower(node: rel.RelationExpr) -> Step:
        found = memo.get(id(node))
        if found is None:
            found = memo[id(node)] = _lower(node)
        return found

    def _lower(node: rel.RelationExpr) -> Step:
        rule_for(node)  # refuses an operator without a rule
        if isinstance(node, rel.Get):
            return Get(node, node.id)
        if isinstance(node, rel.Constant):
            return Constant(node, node.rows)
        if isinstance(node, LINEAR):
            ops: list[LinearOp] = []
            inner: rel.RelationExpr = node
            while isinstance(inner, LINEAR):
                ops.append(inner)
                inner = inner.input
            return Linear(node, lower(inner), tuple(ops))
        if isinstance(node, rel.Union):
            return Union(node, tuple(lower(c) for c in node.inputs_))
        if isinstance(node, rel.Join):
            return Join(
                node,
                tuple(lower(c) for c in node.inputs_),
                first_filters(node),
                tuple(join_steps(node)),
                node.desc.types,
                tuple(node.input_offsets()),
            )
        if isinstance(node, rel.Reduce):
            is_top = accumulable is not None and node is accumulable.reduce
            kind = ReduceKind.ACCUMULABLE if is_top else ReduceKind.TOUCHED_KEYS
            return Reduce(node, lower(node.input), kind)
        (child,) = node.inputs()
        return _UNARY[type(node)](node, lower(child))

    return lower(expr)


def walk(step: Step) -> Iterator[Step]:
    """Every step of the plan, each shared step once, parents first."""
    seen: set[int] = set()
    pending = [step]
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        pending.extend(reversed(node.inputs()))


def operator_rules(step: Step) -> dict[int, Rule]:
    """id(operator) -> the rule of the step it belongs to (for EXPLAIN)."""
    return {id(op): node.rule for node in walk(step) for op in node.operators}


# ------------------------------------------------------- accumulable reduces
# Stands for the Reduce's output inside the linear operators above it.
REDUCE_OUTPUT = GlobalId.transient(2**31 - 1)


@dataclass(frozen=True)
class AccumulatePlan:
    """A view `Linear*(Reduce(input))` whose aggregates are COUNT / SUM
    (accumulate.py keeps its per-group accumulators on Spark)."""

    reduce: rel.Reduce
    top: rel.RelationExpr  # the operators above the Reduce, reading REDUCE_OUTPUT
    state_desc: RelationDesc

    @property
    def key_arity(self) -> int:
        return len(self.reduce.group_key)


def accumulate_plan(expr: rel.RelationExpr) -> AccumulatePlan | None:
    """The plan if `expr` is linear operators over a COUNT/SUM Reduce."""
    chain: list[LinearOp] = []
    node = expr
    while isinstance(node, LINEAR):
        chain.append(node)
        node = node.input
    if not isinstance(node, rel.Reduce) or not node.aggregates or not node.group_key:
        return None
    if any(
        a.distinct or a.func not in (rel.AggregateFunc.COUNT, rel.AggregateFunc.SUM)
        for a in node.aggregates
    ):
        return None
    top: rel.RelationExpr = rel.Get(REDUCE_OUTPUT, node.desc)
    for op in reversed(chain):
        top = dataclasses.replace(op, input=top)
    return AccumulatePlan(node, top, _state_desc(node))


def _state_desc(reduce: rel.Reduce) -> RelationDesc:
    input_types = reduce.input.desc.types
    names = [f"k{i}" for i in range(len(reduce.group_key))]
    types = [ColumnType(t.scalar_type, True) for t in reduce.desc.types[: len(names)]]
    names.append("rows")
    types.append(ColumnType(ScalarType.BIGINT, False))
    for i, aggregate in enumerate(reduce.aggregates):
        if aggregate.func is rel.AggregateFunc.SUM:
            names.append(f"s{i}")
            types.append(ColumnType(aggregate.typ(input_types).scalar_type, True))
        names.append(f"n{i}")
        types.append(ColumnType(ScalarType.BIGINT, False))
    return RelationDesc(tuple(names), tuple(types))


# ---------------------------------------------------------- failing scalars
def can_fail(expr: ScalarExpr) -> bool:
    """Whether a scalar can fail on a row in a way the engines report as an
    error update (division or modulo by zero, RaiseError) rather than a
    failed step (spark_errors.py has the Spark side of each)."""
    if isinstance(expr, RaiseError):
        return True
    if isinstance(expr, CallBinary) and expr.func in (BinaryFunc.DIV, BinaryFunc.MOD):
        return True
    return any(can_fail(child) for child in expr.children())


def plan_can_fail(expr: rel.RelationExpr) -> bool:
    """Whether any scalar of the plan can fail (it then has an error
    collection). Each shared subplan is looked at once."""
    seen: set[int] = set()
    pending = [expr]
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if any(can_fail(s) for s in _scalars(vars(node).values())):
            return True
        pending.extend(node.inputs())
    return False


def _scalars(values: object) -> list[ScalarExpr]:
    """The scalar expressions in an operator's fields (tuples, AggregateExprs)."""
    if isinstance(values, ScalarExpr):
        return [values]
    if isinstance(values, tuple | list) or type(values).__name__ == "dict_values":
        return [s for v in values for s in _scalars(v)]  # type: ignore[attr-defined]
    inner = getattr(values, "expr", None)  # an AggregateExpr
    return [inner] if isinstance(inner, ScalarExpr) else []
