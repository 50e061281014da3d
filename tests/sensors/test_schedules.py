"""REFRESH EVERY views get a schedule; views refreshed on commit are run by
the timestamp sensor (new rows in their tables and sources) and, if they
read a view, by their eager condition through `tidemark_automation`, a
sensor running by default (a view parent materialized)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from assets import ON_VIEW_PARENTS, VIEWS
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
    with dg.build_schedule_context(
        repository_def=env.defs.get_repository_def(), resources={"coordinator": env.resource}
    ) as context:
        data = schedule.evaluate_tick(context)
    (request,) = data.run_requests or []
    job = env.defs.get_repository_def().get_job(request.job_name or schedule.job_name)
    assert job.asset_layer.selected_asset_keys == {key("auctions_per_item")}

    # The on-commit views: the timestamp sensor's job; those reading a view
    # (item_stats over auction_bids, and the mixed watched_items and
    # item_interest: a table or a webhook and item_stats) are also eager.
    on_commit = {key(n) for n in ("auction_bids", "item_stats", "watched_items", "item_interest")}
    eager = {key(n) for n in ("item_stats", "watched_items", "item_interest")}
    graph = env.defs.resolve_asset_graph()
    conditioned = {node.key for node in graph.asset_nodes if node.automation_condition is not None}
    assert conditioned == eager  # not auction_bids (tables only), the REFRESH EVERY view,
    # the index, sources or tables
    for asset in eager:
        condition = graph.get(asset).automation_condition
        assert condition is ON_VIEW_PARENTS
        assert condition.get_label() == "eager (view parents)"
    repository = env.defs.get_repository_def()
    assert {s.name for s in repository.sensor_defs} == {
        "tidemark_timestamps",
        "tidemark_compaction",
        "tidemark_automation",  # covers every conditioned view: no default sensor added
    }
    automation = env.defs.resolve_sensor_def("tidemark_automation")
    assert isinstance(automation, dg.AutomationConditionSensorDefinition)
    assert automation.default_status is dg.DefaultSensorStatus.RUNNING
    assert automation.asset_selection.resolve(graph) == eager
    assert repository.get_job("tidemark_views").asset_layer.selected_asset_keys == on_commit
    sensor = env.defs.resolve_sensor_def("tidemark_timestamps")
    assert sensor.job_name == "tidemark_views"


def test_eager_condition_looks_at_view_parents_only() -> None:
    """eager's `any_deps_updated` and `any_deps_missing` are restricted to
    materialized views (sources and tables are never materialized in
    Dagster); `in_progress` and `any_deps_in_progress` are eager's own."""
    labels = {}

    def walk(condition: dg.AutomationCondition) -> None:
        labels[condition.get_label() or condition.name] = condition
        for child in condition.children:
            walk(child)

    walk(ON_VIEW_PARENTS)
    for label in ("any_deps_updated", "any_deps_missing"):
        assert labels[label].allow_selection == VIEWS, label  # type: ignore[attr-defined]
    assert labels["any_deps_in_progress"].allow_selection is None  # type: ignore[attr-defined]
    assert "run_in_progress" in labels and "newly_missing" in labels
