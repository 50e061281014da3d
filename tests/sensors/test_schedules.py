"""REFRESH EVERY views get a schedule; views refreshed on commit are run by
the timestamp sensor alone: no automation condition or automation sensor
also requests them (two mechanisms would run each view twice)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from sensors import cron_for_interval
from tests.assets.support import demo_env, key


@pytest.mark.parametrize(
    ("interval_ms", "cron"),
    [
        (1_000, "* * * * *"),
        (60_000, "* * * * *"),
        (5 * 60_000, "*/5 * * * *"),
        (7 * 60_000, "*/6 * * * *"),  # cron cannot say 7: a little more often
        (3_600_000, "0 * * * *"),
        (6 * 3_600_000, "0 */6 * * *"),
        (86_400_000, "0 0 * * *"),
    ],
)
def test_cron_for_interval(interval_ms: int, cron: str) -> None:
    assert cron_for_interval(interval_ms) == cron


def test_refresh_every_views_have_a_schedule_on_commit_views_one_sensor(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    schedules = list(env.defs.schedules or [])
    assert [s.name for s in schedules] == ["refresh_materialize_public_auctions_per_item"]
    (schedule,) = schedules
    assert isinstance(schedule, dg.ScheduleDefinition)
    assert schedule.cron_schedule == "* * * * *"
    assert schedule.default_status is dg.DefaultScheduleStatus.RUNNING
    with dg.build_schedule_context(repository_def=env.defs.get_repository_def()) as context:
        data = schedule.evaluate_tick(context)
    (request,) = data.run_requests or []
    job = env.defs.get_repository_def().get_job(request.job_name or schedule.job_name)
    assert job.asset_layer.selected_asset_keys == {key("auctions_per_item")}

    # The on-commit views: the timestamp sensor's job, nothing else.
    on_commit = {key(n) for n in ("auction_bids", "item_stats", "watched_items", "item_interest")}
    graph = env.defs.resolve_asset_graph()
    assert all(node.automation_condition is None for node in graph.asset_nodes)
    repository = env.defs.get_repository_def()
    assert {s.name for s in repository.sensor_defs} == {
        "tidemark_timestamps",
        "tidemark_compaction",
    }
    assert repository.get_job("tidemark_views").asset_layer.selected_asset_keys == on_commit
    sensor = env.defs.resolve_sensor_def("tidemark_timestamps")
    assert sensor.job_name == "tidemark_views"
