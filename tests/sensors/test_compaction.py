"""The compaction sensor through build_sensor_context: it runs the server's
compaction pass without Spark, records the collections whose frontiers moved
as observations, and keeps them in its cursor so unchanged ones are not
recorded again."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg

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
        since_before, upper_before = other.storage.collection_frontiers(bids)
    with dg.instance_for_test() as instance:
        first = _tick(env, instance, None)
        assert not first.run_requests
        observed = {e.asset_key.path[-1]: e for e in first.asset_events}
        assert set(observed) == COLLECTIONS
        for name, event in observed.items():
            since, upper = event.metadata["since"].value, event.metadata["upper"].value
            assert since is not None and upper is not None and since <= upper, name
            assert "compacted_batches" in event.metadata
        cursor = json.loads(first.cursor or "{}")
        assert cursor["passes"] == 1 and len(cursor["frontiers"]) == len(COLLECTIONS)
        # The read policy (1 s of history) moved the since up to the view's needs.
        assert observed["bids"].metadata["since"].value >= since_before.time
        assert observed["bids"].metadata["upper"].value == upper_before.time

        second = _tick(env, instance, first.cursor)
        again = {e.asset_key.path[-1] for e in second.asset_events}
        # Nothing was written in between: sources and views are not recorded
        # again (opening an environment advances its tables, so they may be).
        assert again <= {"watchlist", "item_views"}
        assert json.loads(second.cursor or "{}")["passes"] == 2
