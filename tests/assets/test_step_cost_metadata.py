"""Why a view's step cost what it did, on its materialization in Dagster
(issue 14): the view's arranged state (rows, bytes, as
mz_internal.mz_arrangement_sizes counts it) and the rows the step read from
its inputs' updates, from inputs' whole contents and from that state."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from tests.assets.support import DemoEnv, key, metadata_values, project_env, run_sql

SQL = """
CREATE TABLE orders (id bigint NOT NULL, item text NOT NULL);
CREATE MATERIALIZED VIEW order_counts AS
    SELECT item, count(*) AS orders FROM orders GROUP BY item;
"""

KEYS = (
    "state_rows",
    "state_bytes",
    "rows_read_from_delta",
    "rows_read_from_snapshots",
    "rows_read_from_state",
    "step_reads",
)


def _view_metadata(result: dg.ExecuteInProcessResult) -> dict[str, object]:
    (event,) = [
        e.materialization
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key.path[-1] == "order_counts"
    ]
    return metadata_values(event)


def _materialize_view(env: DemoEnv, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        env.assets(),
        selection=[key("order_counts")],
        resources={"coordinator": env.resource},
        instance=instance,
    )


def test_a_view_materialization_says_what_its_step_read(tmp_path: Path) -> None:
    env = project_env(tmp_path, SQL)
    with dg.instance_for_test() as instance, env.coordinator() as other:
        run_sql(other, ["INSERT INTO orders VALUES (1, 'kettle'), (2, 'lamp'), (3, 'lamp')"])
        first = _materialize_view(env, instance)
        assert first.success
        one = _view_metadata(first)
        assert set(KEYS) <= set(one), sorted(one)
        assert one["engine"] == "local" and one["step_kind"] == "hydration"
        # One accumulator per distinct item: the state is the groups, not the rows.
        assert one["state_rows"] == 2
        assert isinstance(one["state_bytes"], int) and one["state_bytes"] > 0
        assert [one["rows_read_from_delta"], one["rows_read_from_snapshots"]] in ([3, 0], [0, 3])

        # One new order of a known item, one of a new item.
        run_sql(other, ["INSERT INTO orders VALUES (4, 'lamp'), (5, 'desk')"])
        second = _materialize_view(env, instance)
        assert second.success
        two = _view_metadata(second)
        assert two["step_kind"] == "catch-up" and two["engine"] == "local"
        # An incremental step reads its delta and the state of the keys it
        # touches (lamp's accumulator; desk has none yet), no input whole.
        assert two["rows_read_from_delta"] == 2
        assert two["rows_read_from_snapshots"] == 0
        assert two["rows_read_from_state"] == 1
        assert two["state_rows"] == 3
        assert "2 input updates" in str(two["step_reads"])
