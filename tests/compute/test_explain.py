"""EXPLAIN of maintained views marks each operator with the renderer's rule,
and the renderer records the same rules (both read compute/rules.py)."""

from __future__ import annotations

import inspect

import pytest
from pyspark.sql import SparkSession

import coordinator_lib.expr.relation as relation
import coordinator_lib.expr.temporal as temporal
from coordinator_lib.compute.explain import annotate, explain_steps, explain_view
from coordinator_lib.compute.render import Rendered, StepContext, empty_frame, render
from coordinator_lib.compute.rules import RULES, Rule
from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.sql import CreateViewPlan, InMemoryCatalog, plan_statement
from coordinator_lib.sql.explain import describe

TABLES = [
    "CREATE TABLE t (k integer, v bigint)",
    "CREATE TABLE u (k integer NOT NULL, name text)",
]
JOIN_GROUP = (
    "CREATE MATERIALIZED VIEW mv AS SELECT u.name, count(*) AS n, sum(t.v) AS total "
    "FROM t JOIN u ON t.k = u.k WHERE t.v > 0 GROUP BY u.name"
)
JOIN_MAX = (
    "CREATE MATERIALIZED VIEW mx AS SELECT u.name, max(t.v) AS top "
    "FROM t JOIN u ON t.k = u.k GROUP BY u.name"
)
GLOBAL = "CREATE MATERIALIZED VIEW g AS SELECT count(*) AS n FROM t"
SET_OPS = "CREATE MATERIALIZED VIEW s AS SELECT k FROM t EXCEPT SELECT k FROM u"


def _plan(sql: str) -> tuple[CreateViewPlan, InMemoryCatalog]:
    catalog = InMemoryCatalog()
    for ddl in TABLES:
        catalog.apply(plan_statement(ddl, catalog))
    plan = plan_statement(sql, catalog)
    assert isinstance(plan, CreateViewPlan)
    return plan, catalog


def _preorder(expr: RelationExpr) -> list[RelationExpr]:
    out = [expr]
    for child in expr.inputs():
        out += _preorder(child)
    return out


def test_explain_of_join_and_aggregate_marks_every_operator() -> None:
    plan, catalog = _plan(JOIN_MAX)
    text = explain_view(plan.expr, catalog.names())
    assert text == "\n".join(
        [
            "Reduce group_by=[#3] aggregates=[max(#1)] [incremental: touched keys]",
            "  Join on=(#0 = #2) [incremental]",
            "    Get materialize.public.t [source]",
            "    Get materialize.public.u [source]",
        ]
    ), text


def test_explain_of_count_and_sum_view_shows_the_accumulating_reduce() -> None:
    plan, catalog = _plan(JOIN_GROUP)
    text = explain_view(plan.expr, catalog.names())
    assert text == "\n".join(
        [
            "Reduce group_by=[#3] aggregates=[count(*), sum(#1)] [incremental: accumulated]",
            "  Join on=(#0 = #2) [incremental]",
            "    Filter (#1 > 0) [incremental]",
            "      Get materialize.public.t [source]",
            "    Get materialize.public.u [source]",
        ]
    ), text


@pytest.mark.parametrize("sql", [JOIN_MAX, GLOBAL, SET_OPS])
def test_every_line_carries_its_operators_mark(sql: str) -> None:
    plan, _ = _plan(sql)
    # Constant rows print as "- (...)" lines under their operator.
    lines = [line for line in explain_view(plan.expr).splitlines() if line.strip()[:1] != "-"]
    nodes = _preorder(plan.expr)
    assert len(lines) == len(nodes)
    for line, node in zip(lines, nodes, strict=True):
        assert line.strip() == f"{describe(node)} {annotate(node)}"


def test_every_operator_has_a_rule() -> None:
    """A new operator cannot be added without deciding how it is maintained."""
    operators = {
        cls
        for module in (relation, temporal)
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, RelationExpr) and cls is not RelationExpr
    }
    assert operators == set(RULES)
    assert annotate(RelationExpr()) == "[unsupported]"
    assert {RULES[relation.Get], RULES[relation.Constant]} == {Rule.SOURCE}


@pytest.mark.spark
@pytest.mark.parametrize("sql", [JOIN_GROUP, JOIN_MAX, GLOBAL, SET_OPS])
@pytest.mark.parametrize("hydrating", [True, False])
def test_renderer_records_the_rules_explain_shows(
    spark: SparkSession, sql: str, hydrating: bool
) -> None:
    """What render.py records is what `annotate` says, operator by operator
    (render is lazy: no Spark job runs, only the plan is built)."""
    plan, _ = _plan(sql)
    inputs = {}
    for node in _preorder(plan.expr):
        if isinstance(node, relation.Get):
            old = None if hydrating else empty_frame(spark, node.desc, with_time=False)
            inputs[node.id] = Rendered(old, empty_frame(spark, node.desc, with_time=True))
    ctx = StepContext(spark, 5, 7, inputs, hydrating=hydrating)
    render(plan.expr, ctx)
    expected = [(type(n).__name__, annotate(n)[1:-1]) for n in _preorder(plan.expr)]
    assert ctx.rules == expected


def test_explain_physical_prints_the_step_plan_with_rules_and_state() -> None:
    """EXPLAIN PHYSICAL PLAN draws the step plan the delta rules run: a
    Filter, Map and Project merge into one Linear step (a predicate on one
    join input is a step of its own below the join); a Reduce shows its
    kind; each step its rule and the state it keeps."""
    linear, catalog = _plan(
        "CREATE MATERIALIZED VIEW lin AS SELECT u.name, t.v * 2 AS d "
        "FROM t JOIN u ON t.k = u.k WHERE t.v > 0 AND t.v < u.k"
    )
    assert explain_steps(linear.expr, catalog.names()).splitlines() == [
        "Linear Filter (#1 < #2::bigint); Map ((#1 * 2)); Project (#3, #4)"
        " [incremental] state=none",
        "  Join on=(#0 = #2) [incremental] state=each input by its join key",
        "    Linear Filter (#1 > 0) [incremental] state=none",
        "      Get materialize.public.t [source] state=none",
        "    Get materialize.public.u [source] state=none",
    ]
    top, catalog = _plan(JOIN_MAX)
    assert explain_steps(top.expr, catalog.names()).splitlines()[0] == (
        "Reduce group_by=[#3] aggregates=[max(#1)] kind=touched keys "
        "[incremental: touched keys] state=accumulators and MIN/MAX values in order"
        " by group key [#3]"
    )
    counted, _ = _plan("CREATE MATERIALIZED VIEW c AS SELECT k, count(*) AS n FROM t GROUP BY k")
    assert (
        "kind=accumulable [incremental: accumulated] state=accumulators by group key [#0]"
        in explain_steps(counted.expr)
    )
    total, _ = _plan("CREATE MATERIALIZED VIEW s AS SELECT sum(v) AS s FROM t")
    assert "state=accumulators by group key []" in explain_steps(total.expr)
    extremes, _ = _plan("CREATE MATERIALIZED VIEW x AS SELECT k, max(v) AS m FROM t GROUP BY k")
    assert "state=accumulators and MIN/MAX values in order by group key [#0]" in (
        explain_steps(extremes.expr)
    )
    strings, _ = _plan(
        "CREATE MATERIALIZED VIEW g AS SELECT k, string_agg(v::text, ',') AS a FROM t GROUP BY k"
    )
    assert "state=values [#1] with multiplicities by group key [#0]" in (
        explain_steps(strings.expr)
    )
    distinct, _ = _plan(
        "CREATE MATERIALIZED VIEW d AS SELECT k, count(DISTINCT v) AS n, max(v) AS m"
        " FROM t GROUP BY k"
    )
    assert (
        "state=accumulators, DISTINCT values with multiplicities and MIN/MAX values in order"
        " by group key [#0]" in explain_steps(distinct.expr)
    )
    top, _ = _plan("CREATE MATERIALIZED VIEW p AS SELECT k, v FROM t ORDER BY v DESC, k LIMIT 3")
    assert "state=input by group key [] in order [#1 desc, #0]" in explain_steps(top.expr)
    timed, _ = _plan("CREATE MATERIALIZED VIEW f AS SELECT k FROM t WHERE mz_now() < v")
    assert "[incremental: temporal] state=pending insertions and retractions by time" in (
        explain_steps(timed.expr)
    )
