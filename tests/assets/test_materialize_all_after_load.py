""" "Materialize all" on the demo after its load generator ran (issue 16).

The demo as `make run` leaves it: `tidemark serve` (here in-process) keeps
the AUCTION load generator running, steps every view and compacts, while a
user presses "Materialize all": one Dagster run of every asset and check on
a real DagsterInstance, on the same environment. The generator ticks every
10 ms instead of every second and compaction runs every 200 ms, so a few
thousand auctions and bids and many compactions stand in for a long idle
hour of the demo. Every step must succeed: no run fails on files compacted
under it, or on a view the server stepped past the run's dataflow."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from coordinator_lib.adapter.coordinator import Config
from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import run_on
from tests.assets.support import DEMO, demo_env, key

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BIDS = 3_000  # bids the generator writes before the run starts


def _fast_demo(tmp_path: Path) -> Path:
    """The demo project with its load generator ticking every 10 ms."""
    project = tmp_path / "project"
    shutil.copytree(DEMO / "sql", project / "sql")
    sources = project / "sql" / "01_sources.sql"
    text = sources.read_text()
    assert "TICK INTERVAL '1s'" in text
    sources.write_text(text.replace("TICK INTERVAL '1s'", "TICK INTERVAL '10ms'"))
    return project


def test_materialize_all_succeeds_after_the_load_generator_ran(tmp_path: Path, spark: Any) -> None:
    env = demo_env(tmp_path, _fast_demo(tmp_path))
    server = Environment(
        Config(
            data_dir=str(env.data_dir),
            maintenance_interval_ms=50,
            compaction_interval_ms=200,
        ),
        pgwire_port=0,
        http_port=0,
        spark=spark,
    )
    server.start()
    session = server.handle.client.startup("materialize", "materialize")
    sql = run_on(session)
    try:
        sql("INSERT INTO watchlist VALUES (1, 'Best Pizza in Town', 50)")
        deadline = time.monotonic() + 300
        while sql("SELECT count(*) FROM bids")[0][0] < BIDS:
            assert time.monotonic() < deadline, "the load generator wrote too few bids"
            time.sleep(1)
        with dg.instance_for_test() as instance:
            result = dg.materialize(
                [*env.assets(), *env.checks()],
                resources={"coordinator": env.resource},
                instance=instance,
                raise_on_error=False,
            )
            failed = {
                e.step_key: e.event_specific_data.error.message  # type: ignore[union-attr]
                for e in result.all_events
                if e.is_step_failure
            }
            assert result.success, failed
            materialized = {e.asset_key for e in result.get_asset_materialization_events()}
            assert {a.key for a in env.assets()} <= materialized
            assert key("item_stats_by_item") in materialized
            evaluations = result.get_asset_check_evaluations()
            assert evaluations and all(e.passed for e in evaluations), [
                (e.asset_key.to_user_string(), e.check_name) for e in evaluations if not e.passed
            ]
        # The server kept going all along, and compacted what the run read.
        assert sql("SELECT count(*) FROM bids")[0][0] >= BIDS
    finally:
        session.terminate()
        server.stop()
