"""The compaction sensor through build_sensor_context: it runs the server's
compaction pass without Spark, records the collections whose frontiers moved
as observations, and keeps them in its cursor so unchanged ones are not
recorded again."""

from __future__ import annotations

import json
import time
from pathlib import Path

import dagster as dg

from assets.metadata import frontier_ms
from coordinator_lib.adapter import operations
from tests.assets.support import DemoEnv, demo_env, id_of

COLLECTIONS = {
    "organizations", "users", "accounts", "auctions", "bids", "watchlist", "item_views",
    "auction_bids", "item_stats", "watched_items", "item_interest", "auctions_per_item",
}  # fmt: skip


def _tick(env: DemoEnv, instance: dg.DagsterInstance, cursor: str | None):  # type: ignore[no-untyped-def]
    sensor = env.defs.resolve_sensor_def("tidemark_compaction")
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"coordinator": env.resource}
    ) as context:
        return sensor.evaluate_tick(context)


def _batches(coordinator, name: str) -> int:  # type: ignore[no-untyped-def]
    return len(coordinator.storage.shard(id_of(coordinator, name)).state().batches)


def test_compaction_sensor_compacts_and_records_moved_frontiers(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    assert env.defs.resolve_sensor_def("tidemark_compaction").default_status is (
        dg.DefaultSensorStatus.RUNNING
    )
    with env.coordinator() as other:  # some history to compact: a few sealed steps
        for _ in range(3):
            operations.assign_timestamps(other)
            for view in ("auction_bids", "item_stats"):
                operations.materialize(other, id_of(other, view))
        bids = id_of(other, "bids")
        since_before, _ = other.storage.collection_frontiers(bids)
        # The read policy keeps 1 s of history: past it, one more sealed step
        # lets the since move (the views reading bids have taken it in).
        time.sleep(1.2)
        operations.assign_timestamps(other)
        operations.materialize(other, id_of(other, "auction_bids"))
        _, upper_before = other.storage.collection_frontiers(bids)
        batches_before = {name: _batches(other, name) for name in ("bids", "auction_bids")}
    assert batches_before["bids"] > 1 and batches_before["auction_bids"] > 1
    with dg.instance_for_test() as instance:
        first = _tick(env, instance, None)
        assert not first.run_requests
        observed = {e.asset_key.path[-1]: e for e in first.asset_events}
        assert set(observed) == COLLECTIONS
        for name, event in observed.items():
            since, upper = (frontier_ms(event.metadata[n].value) for n in ("since", "upper"))
            assert since is not None and upper is not None and since <= upper, name
        # The pass compacted: the sensor says so, and the shards hold fewer batches.
        assert observed["bids"].metadata["compacted_batches"].value > 0
        with env.coordinator() as other:
            for name, before in batches_before.items():
                assert _batches(other, name) < before, name
        cursor = json.loads(first.cursor or "{}")
        assert cursor["passes"] == 1 and len(cursor["frontiers"]) == len(COLLECTIONS)
        # The since moved strictly, as far as the policy and the views allow.
        bids = {n: frontier_ms(observed["bids"].metadata[n].value) for n in ("since", "upper")}
        assert bids["since"] > since_before.time  # type: ignore[operator]
        assert bids["upper"] == upper_before.time

        second = _tick(env, instance, first.cursor)
        again = {e.asset_key.path[-1] for e in second.asset_events}
        # Nothing was written in between: sources and views are not recorded
        # again (opening an environment advances its tables, so they may be).
        assert again <= {"watchlist", "item_views"}
        assert json.loads(second.cursor or "{}")["passes"] == 2
