""" "Materialize all" while a server compacts (issue 16): a Dagster run plans
Spark reads of batches (the index `item_stats_by_item` hydrates its
arrangement from item_stats' snapshot on Spark) while the server's
maintenance loop, another coordinator on the same environment, steps the
views and compacts every shard. The run's seqno holds keep the planned
batches' blobs until its Spark jobs ran, so every asset materializes, all
together and the index alone. Before, the index failed every time with
`[PATH_NOT_FOUND] Path does not exist: .../blob/...`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from coordinator_lib.adapter.coordinator import Config, Coordinator
from coordinator_lib.storage.controller import StorageParameters
from tests.assets.support import demo_env, id_of, key

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _server(data_dir: Path, spark: Any) -> Coordinator:
    """The environment's server (what `tidemark serve` runs): load generator
    ticks, views stepped, and compaction with a short history as often as it
    can, so item_stats' batches are replaced every few steps."""
    server = Coordinator(
        Config(
            data_dir=str(data_dir),
            maintenance_interval_ms=20,
            advance_interval_ms=200,
            compaction_interval_ms=20,
            default_retain_history_ms=50,
        ),
        spark,
    )
    # Merge as soon as a shard has two batches: item_stats gets one per
    # auction tick (1 s), so its batches are replaced during any Spark job
    # that takes longer (an hour of the load generator does the same with
    # the default of 8).
    server.storage.update_configuration(StorageParameters(compaction_max_batches=1))
    return server


def _wait_for_bids_and_compaction(server: Coordinator) -> None:
    """Until the load generator's bids reached item_stats and compaction has
    replaced item_stats' batches at least once."""
    stats = server.storage.shard(id_of(server, "item_stats"))
    deadline = time.monotonic() + 120
    compacted = 0
    while time.monotonic() < deadline:
        compacted += server.compaction_pass().compacted_batches
        if compacted and stats.statistics().rows > 0:
            return
        time.sleep(0.2)
    pytest.fail("the load generator's bids never reached item_stats, or nothing compacted")


def test_index_run_survives_the_server_compacting_what_it_planned(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race made certain: right after the run plans each Spark snapshot
    (the index's hydration), the server rewrites every batch of that shard
    and collects garbage. Before seqno holds the run failed every time
    (FILE_NOT_EXIST / PATH_NOT_FOUND on a compacted batch)."""
    from coordinator_lib.compute import dataflow

    env = demo_env(tmp_path)
    server = Coordinator(Config(data_dir=str(env.data_dir), background=False))
    planned = dataflow.snapshot_dataframe
    compacted: list[int] = []

    def plan_then_compact(shard: Any, spark: Any, as_of: int) -> Any:
        df = planned(shard, spark, as_of)
        other = server.storage.persist.open_shard(shard.shard_id, shard.desc)
        compacted.append(other.compact(max_batches=0))  # every batch rewritten
        other.collect_garbage()
        return df

    monkeypatch.setattr(dataflow, "snapshot_dataframe", plan_then_compact)
    try:
        with dg.instance_for_test() as instance:
            for selection in (None, [key("item_stats_by_item")]):
                result = dg.materialize(
                    [*env.assets(), *env.checks()] if selection is None else env.assets(),
                    selection=selection,
                    resources={"coordinator": env.resource},
                    instance=instance,
                    raise_on_error=False,
                )
                failed = [e.step_key for e in result.all_events if e.is_step_failure]
                assert result.success, failed
        assert any(compacted)  # the race really happened
    finally:
        server.close()


def test_materialize_all_and_the_index_alone_while_the_server_compacts(
    tmp_path: Path, spark: Any
) -> None:
    env = demo_env(tmp_path)  # the demo SQL applied to a fresh data directory
    server = _server(env.data_dir, spark)
    try:
        _wait_for_bids_and_compaction(server)
        everything = [*env.assets(), *env.checks()]
        with dg.instance_for_test() as instance:
            result = dg.materialize(
                everything,
                resources={"coordinator": env.resource},
                instance=instance,
                raise_on_error=False,
            )
            failures = [event.step_key for event in result.all_events if event.is_step_failure]
            assert result.success, failures
            materialized = {
                e.materialization.asset_key for e in result.get_asset_materialization_events()
            }
            assert {k for a in env.assets() for k in a.keys} <= materialized
            assert key("item_stats_by_item") in materialized

            # Re-launching the index alone: a fresh run hydrates it again.
            alone = dg.materialize(
                env.assets(),
                selection=[key("item_stats_by_item")],
                resources={"coordinator": env.resource},
                instance=instance,
                raise_on_error=False,
            )
            assert alone.success, [e.step_key for e in alone.all_events if e.is_step_failure]
            (event,) = alone.get_asset_materialization_events()
            assert event.materialization.asset_key == key("item_stats_by_item")
    finally:
        server.close()
