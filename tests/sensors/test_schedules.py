"""REFRESH EVERY views get a schedule; views refreshed on commit carry the
eager automation condition, evaluated by a sensor that runs by default."""

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


def test_refresh_every_view_has_a_schedule_others_are_eager(tmp_path: Path) -> None:
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
    assert key("auctions_per_item") in job.asset_layer.selected_asset_keys

    graph = env.defs.resolve_asset_graph()
    for name in ("auction_bids", "item_stats", "watched_items", "item_interest"):
        assert graph.get(key(name)).automation_condition is not None, name
    for name in ("auctions_per_item", "item_stats_by_item", "watchlist", "bids"):
        assert graph.get(key(name)).automation_condition is None, name
    automation = env.defs.resolve_sensor_def("tidemark_automation")
    assert automation.default_status is dg.DefaultSensorStatus.RUNNING
