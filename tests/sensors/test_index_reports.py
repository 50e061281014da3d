"""The server's indexes in its heartbeat and in the timestamp sensor's
reports (issue 16), without Spark: the heartbeat's record carries each
index's frontiers and rows, and a tick reports each hydrated index whose
upper moved as a runless materialization (the Spark end-to-end test is
tests/sensors/test_served_index.py)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from coordinator_lib.adapter import operations
from coordinator_lib.adapter.maintainer import IndexState, MaintainerHeartbeat, current_maintainer
from coordinator_lib.adapter.operations import Frontiers
from coordinator_lib.persist.sqlite_consensus import SqliteConsensus
from sensors import TimestampCursor, plan_tick
from sensors.timestamps import Observed
from tests.assets.support import demo_env, key

INDEX = key("item_stats_by_item")


def test_the_heartbeat_carries_the_servers_indexes(tmp_path: Path) -> None:
    consensus = SqliteConsensus(tmp_path / "consensus.db")
    heartbeat = MaintainerHeartbeat(consensus, ttl_ms=60_000)
    heartbeat.start()
    try:
        assert current_maintainer(consensus).indexes == {}  # type: ignore[union-attr]
        state = IndexState(since=1_000, upper=2_000, rows=7, hydrated=True)
        heartbeat.report_indexes({"u9": state})
        heartbeat._write(heartbeat._started_ms + 60_000)  # the next renewal
        live = current_maintainer(consensus)
        assert live is not None and live.indexes == {"u9": state}
    finally:
        heartbeat.stop()


def test_a_tick_reports_the_servers_hydrated_indexes(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    with env.resource.open(spark=False) as opened:
        objects = tuple(operations.catalog_objects(opened))
    frontiers = {
        key(o.name).to_user_string(): Frontiers(1_000, 2_000)
        for o in objects
        if o.kind.value != "index"
    }
    index = INDEX.to_user_string()

    def tick(state: IndexState, cursor: TimestampCursor) -> tuple[list, TimestampCursor]:
        observed = Observed(frontiers, maintainer="tidemark serve x", indexes={index: state})
        plan = plan_tick(objects, observed, cursor, now_ms=5_000)
        assert plan.run_request is None
        return [e for e in plan.reported if e.asset_key == INDEX], plan.cursor

    hydrating = IndexState(since=1_000, upper=1_000, rows=0, hydrated=False)
    reported, cursor = tick(hydrating, TimestampCursor())
    assert reported == []  # not readable on the server yet: nothing to report

    hydrated = IndexState(since=1_500, upper=2_000, rows=42, hydrated=True)
    reported, cursor = tick(hydrated, cursor)
    (event,) = reported
    assert event.metadata["dagster/row_count"] == dg.MetadataValue.int(42)
    assert event.metadata["upper"] == dg.MetadataValue.timestamp(2.0)
    assert event.metadata["lag_seconds"] == dg.MetadataValue.float(3.0)
    assert event.metadata["maintained_by"] == dg.MetadataValue.text("tidemark serve x")
    assert event.tags["dagster/data_version"] == "2000"

    assert tick(hydrated, cursor)[0] == []  # its upper did not move: nothing new
    moved = IndexState(since=1_500, upper=2_500, rows=43, hydrated=True)
    (event,) = tick(moved, cursor)[0]
    assert event.metadata["previous_upper"] == dg.MetadataValue.timestamp(2.0)
