"""A view with errors (issue 18): its Dagster materialization still steps
it, and its consistency check fails naming the error; other views' checks
pass; deleting the failing row makes the check pass again."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from tests.assets.support import DemoEnv, key, project_env, run_sql

SQL = """
CREATE TABLE a (x int, y int);
CREATE MATERIALIZED VIEW a_div AS SELECT x / y AS q FROM a;
CREATE MATERIALIZED VIEW a_sum AS SELECT sum(x) AS s FROM a;
"""


def _materialize(env: DemoEnv, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [*env.assets(), *env.checks()],
        resources={"coordinator": env.resource},
        instance=instance,
        raise_on_error=False,
    )


def _consistency(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {
        e.asset_key.path[-1]: e
        for e in result.get_asset_check_evaluations()
        if e.check_name == "consistency"
    }


def test_consistency_check_fails_with_the_views_error(tmp_path: Path) -> None:
    env = project_env(tmp_path, SQL)
    with env.coordinator() as coordinator:
        run_sql(coordinator, ["INSERT INTO a VALUES (6, 2), (1, 0), (2, 0)"])
    with dg.instance_for_test() as instance:
        result = _materialize(env, instance)
        materialized = {e.asset_key for e in result.get_asset_materialization_events()}
        assert {key("a_div"), key("a_sum")} <= materialized  # the failing row stops nothing
        checks = _consistency(result)
        assert not checks["a_div"].passed
        assert checks["a_div"].description == "division by zero (SQLSTATE 22012) x2"
        assert checks["a_sum"].passed

        with env.coordinator() as coordinator:
            run_sql(coordinator, ["DELETE FROM a WHERE y = 0"])
        checks = _consistency(_materialize(env, instance))
        assert checks["a_div"].passed, checks["a_div"].description
        assert checks["a_sum"].passed
