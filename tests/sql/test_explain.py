"""EXPLAIN prints Materialize-style operator trees."""

from __future__ import annotations

from coordinator_lib.expr import Filter, Get, Join, RelationExpr
from coordinator_lib.sql import ExplainPlan, SelectPlan, explain, explain_plan, plan_statement
from tests.sql.support import make_catalog

JOIN_AGGREGATE = (
    "SELECT t.b, sum(u.x), count(*) FROM t JOIN u ON t.a = u.a WHERE t.a > 1 GROUP BY t.b"
)


def test_join_aggregate_tree() -> None:
    catalog = make_catalog()
    plan = plan_statement(JOIN_AGGREGATE, catalog)
    assert isinstance(plan, SelectPlan)
    assert explain(plan.expr, names=catalog.names()) == "\n".join(
        [
            "Reduce group_by=[#1] aggregates=[sum(#14), count(*)]",
            "  Join on=(#0 = #13)",
            "    Filter (#0 > 1)",
            "      Get materialize.public.t",
            "    Get materialize.public.u",
        ]
    )


def test_a_predicate_on_one_join_input_filters_that_input() -> None:
    """WHERE and ON predicates that read one FROM item and cannot fail
    filter that item below the join (the join then never holds the rows
    they drop); one reading both items, or one that can fail (a division),
    filters the join's output."""
    catalog = make_catalog()
    plan = plan_statement(
        "SELECT * FROM t, u WHERE t.a > 1 AND u.x IS NOT NULL AND t.e < u.x"
        " AND (u.a = 2 OR NOT u.a < 0) AND t.a / t.a > 0",
        catalog,
    )
    assert isinstance(plan, SelectPlan)
    assert explain(plan.expr, names=catalog.names()) == "\n".join(
        [
            "Filter (#4 < #14) AND ((#0 / #0) > 0)",
            "  CrossJoin",
            "    Filter (#0 > 1)",
            "      Get materialize.public.t",
            "    Filter (#1) IS NOT NULL AND ((#0 = 2) OR NOT((#0 < 0)))",
            "      Get materialize.public.u",
        ]
    )


def test_annotations_and_default_names() -> None:
    plan = plan_statement(JOIN_AGGREGATE, make_catalog())
    assert isinstance(plan, SelectPlan)

    def annotate(node: RelationExpr) -> str:
        return "[incremental]" if isinstance(node, Join | Filter | Get) else "[recomputed]"

    lines = explain(plan.expr, annotate).splitlines()
    assert lines[0].endswith("aggregates=[sum(#14), count(*)] [recomputed]")
    assert lines[1] == "  Join on=(#0 = #13) [incremental]"
    assert lines[3] == "      Get u1 [incremental]"


def test_explain_statement() -> None:
    catalog = make_catalog()
    plan = plan_statement(
        "EXPLAIN SELECT b, a + 1 AS z FROM t WHERE b LIKE 'x%' ORDER BY z DESC LIMIT 5", catalog
    )
    assert isinstance(plan, ExplainPlan) and isinstance(plan.plan, SelectPlan)
    assert explain_plan(plan) == "\n".join(
        [
            "Finish order_by=[#1 desc nulls_first] limit=5 output=[#0, #1]",
            "  Project (#1, #13)",
            "    Map ((#0 + 1))",
            '      Filter (#1 like "x%")',
            "        Get materialize.public.t",
        ]
    )


def test_explain_existing_materialized_view_and_index() -> None:
    catalog = make_catalog()
    catalog.apply(
        plan_statement(
            "CREATE MATERIALIZED VIEW mv AS SELECT a, count(*) AS n FROM t GROUP BY a", catalog
        )
    )
    catalog.apply(plan_statement("CREATE INDEX mv_idx ON mv (a)", catalog))
    for sql in (
        "EXPLAIN MATERIALIZED VIEW mv",
        "EXPLAIN CREATE MATERIALIZED VIEW mv2 AS SELECT a, count(*) AS n FROM t GROUP BY a",
        "EXPLAIN INDEX mv_idx",
    ):
        plan = plan_statement(sql, catalog)
        assert isinstance(plan, ExplainPlan)
        assert explain_plan(plan) == "\n".join(
            [
                "Reduce group_by=[#0] aggregates=[count(*)]",
                "  Get materialize.public.t",
            ]
        ), sql


def test_global_aggregate_and_constants() -> None:
    plan = plan_statement("SELECT count(*) FROM (VALUES (1), (1), (2)) AS v(x)", make_catalog())
    assert isinstance(plan, SelectPlan)
    assert explain(plan.expr) == "\n".join(
        [
            "Union",
            "  Reduce aggregates=[count(*)]",
            "    Constant",
            "      - (1)",
            "      - (1)",
            "      - (2)",
            "  Map (0)",
            "    Union",
            "      Constant",
            "        - ()",
            "      Negate",
            "        Project ()",
            "          Reduce aggregates=[count(*)]",
            "            Constant",
            "              - (1)",
            "              - (1)",
            "              - (2)",
        ]
    )


def test_scalar_formatting() -> None:
    plan = plan_statement(
        "SELECT CASE WHEN g THEN -a ELSE abs(a) END, coalesce(b, 'z') || 'q', c::text, "
        "a IS NULL, NOT g, a IN (1, 2) FROM t",
        make_catalog(),
    )
    assert isinstance(plan, SelectPlan)
    line = explain(plan.expr).splitlines()[1]
    assert line == (
        '  Map (case when #6 then -#0 else abs(#0) end, (coalesce(#1, "z") || "q"), '
        "#2::text, (#0) IS NULL, NOT(#6), ((#0 = 1) OR (#0 = 2)))"
    )
