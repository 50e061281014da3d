"""EXPLAIN PHYSICAL PLAN over pgwire, as a psql user types it: the step plan
of a materialized view and of a SELECT (with its finishing), in a column
named as Materialize names it."""

from __future__ import annotations

from tests.fixtures.served import connect


def test_explain_physical_plan_over_pgwire(environment: object) -> None:
    with connect(environment) as conn:  # type: ignore[arg-type]
        conn.execute("CREATE TABLE t (k int, v bigint)")
        conn.execute("CREATE MATERIALIZED VIEW mv AS SELECT k, sum(v) AS s FROM t GROUP BY k")
        cur = conn.execute("EXPLAIN PHYSICAL PLAN FOR MATERIALIZED VIEW mv")
        assert cur.description is not None and cur.description[0].name == "Physical Plan"
        (text,) = cur.fetchone() or ("",)
        assert text.splitlines() == [
            "Reduce group_by=[#0] aggregates=[sum(#1)] kind=accumulable "
            "[incremental: accumulated] state=accumulators by group key [#0]",
            "  Get materialize.public.t [source] state=none",
        ]
        (select,) = conn.execute(
            "EXPLAIN PHYSICAL PLAN FOR SELECT k FROM t WHERE v > 1 ORDER BY k"
        ).fetchone() or ("",)
        assert select.splitlines()[0].startswith("Finish order_by=[#0 asc")
        assert select.splitlines()[1].startswith("  Linear Filter (#1 > 1); Project (#0)")
        optimized = conn.execute("EXPLAIN MATERIALIZED VIEW mv")
        assert optimized.description is not None
        assert optimized.description[0].name == "Optimized Plan"
