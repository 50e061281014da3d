"""Materialize all while a server compacts (issue 16): a Dagster run plans
Spark reads of batches (the index `item_stats_by_item` hydrates its
arrangement from item_stats' snapshot on Spark) while the server, another
coordinator on the same environment, compacts every shard. The run's seqno
holds keep the planned batches' blobs until its Spark jobs ran, so every
asset materializes, all together and the index alone. Before, the index
failed every time (`[PATH_NOT_FOUND] Path does not exist: .../blob/...`, or
FILE_NOT_EXIST when the files went after Spark listed them).

A race left to chance (a background server compacting every 20 ms during
the run) did not fail reliably on the old code, so the test makes it
certain: the compaction happens right after each plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from coordinator_lib.adapter.coordinator import Config, Coordinator
from tests.assets.support import demo_env, key

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_index_run_survives_the_server_compacting_what_it_planned(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race made certain: right after the run plans each Spark snapshot
    (the index's hydration), the server rewrites every batch of that shard
    and collects garbage. Before seqno holds the run failed every time
    (FILE_NOT_EXIST / PATH_NOT_FOUND on a compacted batch). The demo's index
    is small enough to step in-process: here its steps are sent to Spark."""
    from coordinator_lib.compute import controller, dataflow
    from coordinator_lib.compute.engine import Engine, Work, choose_engine

    def index_on_spark(work: Work, *args: Any, **kwargs: Any) -> Engine:
        return Engine.SPARK if work is Work.INDEX_STEP else choose_engine(work, *args, **kwargs)

    monkeypatch.setattr(controller, "choose_engine", index_on_spark)

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
