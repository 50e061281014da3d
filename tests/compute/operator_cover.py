"""The smallest set of views that puts every operator, rule and function on
an engine at least once.

Stepping every differential view on Spark costs minutes (each view step is a
few Spark jobs). What a Spark run must prove is that each operator with each
incremental rule, each aggregate and each scalar function renders on Spark
exactly as it evaluates in-process; the in-process engine then checks every
view. `cover` picks views greedily until their plans hold every feature any
view's plan holds, so a new construct added to the view list is covered on
Spark without editing the test.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping

from coordinator_lib.compute.explain import view_annotator
from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.expr.scalar import ScalarExpr
from coordinator_lib.sql import CreateViewPlan, InMemoryCatalog, plan_statement

Feature = tuple[str, str]


def _operators(expr: RelationExpr) -> Iterator[RelationExpr]:
    yield expr
    for child in expr.inputs():
        yield from _operators(child)


def _scalars(value: object) -> Iterator[ScalarExpr]:
    """Every scalar expression in a field value (tuples, aggregates, ...)."""
    if isinstance(value, ScalarExpr):
        yield value
        for child in value.children():
            yield from _scalars(child)
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _scalars(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type | RelationExpr):
        for field in dataclasses.fields(value):
            yield from _scalars(getattr(value, field.name))


def _label(node: object) -> str:
    for attribute in ("func", "name", "to"):
        if hasattr(node, attribute):
            label = str(getattr(node, attribute))
            return f"{label} distinct" if getattr(node, "distinct", False) else label
    return ""


def features(expr: RelationExpr) -> set[Feature]:
    """(operator, EXPLAIN mark), aggregate and window functions (and their
    frames' kinds), and scalar (node, function) pairs of one view's plan."""
    mark = view_annotator(expr)
    out: set[Feature] = set()
    for node in _operators(expr):
        out.add((type(node).__name__, mark(node)))
        for field in dataclasses.fields(node):  # type: ignore[arg-type]
            value = getattr(node, field.name)
            for item in value if isinstance(value, tuple) else (value,):
                if dataclasses.is_dataclass(item) and not isinstance(
                    item, ScalarExpr | RelationExpr
                ):
                    out.add((type(item).__name__, _label(item)))
                    # and what it holds (a window function's frame)
                    for inner in dataclasses.fields(item):
                        part = getattr(item, inner.name)
                        if dataclasses.is_dataclass(part) and not isinstance(part, ScalarExpr):
                            out.add((type(part).__name__, _label(part)))
            for scalar in _scalars(value):
                out.add((type(scalar).__name__, _label(scalar)))
    return out


def view_features(setup: Iterable[str], queries: Mapping[str, str]) -> dict[str, set[Feature]]:
    """Plan `setup` (tables, plain views), then each query as a materialized
    view, and return each query's features."""
    catalog = InMemoryCatalog()
    for ddl in setup:
        catalog.apply(plan_statement(ddl, catalog))
    out: dict[str, set[Feature]] = {}
    for name, query in queries.items():
        plan = plan_statement(f"CREATE MATERIALIZED VIEW cover_{name} AS {query}", catalog)
        assert isinstance(plan, CreateViewPlan)
        out[name] = features(plan.expr)
    return out


# Operators whose steps recompute values for touched keys (and what they
# compute): a view survives changing engines only if both engines compute
# bit-identical values for these.
RECOMPUTING_KINDS = frozenset(
    {"Reduce", "Distinct", "Threshold", "Negate", "TopK", "Window", "AggregateExpr", "WindowExpr"}
)


def recomputing(by_view: Mapping[str, set[Feature]]) -> dict[str, set[Feature]]:
    """Each view's features restricted to RECOMPUTING_KINDS."""
    return {name: {f for f in fs if f[0] in RECOMPUTING_KINDS} for name, fs in by_view.items()}


def cover(by_view: Mapping[str, set[Feature]]) -> list[str]:
    """Greedy set cover: the view adding the most uncovered features first
    (ties by name, so the choice is stable)."""
    wanted = set().union(*by_view.values()) if by_view else set()
    chosen: list[str] = []
    while wanted:
        best = max(sorted(by_view), key=lambda name: len(by_view[name] & wanted))
        chosen.append(best)
        wanted -= by_view[best]
    return chosen
