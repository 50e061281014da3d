"""Schedules for views declared WITH (REFRESH EVERY '<interval>'), and the
automation sensor that evaluates the eager condition of on-commit views
reading a view (assets/factory.py, ON_VIEW_PARENTS). (The timestamp sensor,
sensors/timestamps.py, runs on-commit views whose storage inputs have new
rows.)

Cron has minutes as its finest unit and only periods that divide the hour
or the day evenly: an interval is mapped to the closest period at or below
it that cron can express (never less often than asked, at most once a minute).
"""

from __future__ import annotations

import dagster as dg

from assets import Project, asset_key, is_on_commit_view, reads_a_view
from assets.keys import safe_name
from coordinator_lib.adapter import operations
from coordinator_lib.adapter.operations.describe import CatalogObject
from resources import CoordinatorResource

__all__ = [
    "AUTOMATION_SENSOR",
    "build_automation_sensor",
    "build_refresh_schedules",
    "cron_for_interval",
]

AUTOMATION_SENSOR = "tidemark_automation"

_MINUTE = 60_000
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR


def _largest_divisor_at_most(value: int, limit: int) -> int:
    return max(d for d in range(1, limit + 1) if limit % d == 0 and d <= value)


def cron_for_interval(interval_ms: int) -> str:
    """A cron schedule firing every `interval_ms` or a little more often."""
    if interval_ms < _HOUR:
        minutes = _largest_divisor_at_most(max(1, interval_ms // _MINUTE), 60)
        return "* * * * *" if minutes == 1 else f"*/{minutes} * * * *"
    if interval_ms < _DAY:
        hours = _largest_divisor_at_most(interval_ms // _HOUR, 24)
        return "0 * * * *" if hours == 1 else f"0 */{hours} * * *"
    days = interval_ms // _DAY
    return "0 0 * * *" if days == 1 else f"0 0 */{min(days, 28)} * *"


def build_refresh_schedules(project: Project) -> list[dg.ScheduleDefinition]:
    """One schedule per REFRESH EVERY view. While `tidemark serve` is live it
    keeps those views fresh itself, so a tick then skips, naming the server
    (one model: Dagster runs only what nobody else maintains)."""
    return [_refresh_schedule(obj) for obj in project.objects if obj.refresh_every_ms is not None]


def _refresh_schedule(obj: CatalogObject) -> dg.ScheduleDefinition:
    assert obj.refresh_every_ms is not None

    @dg.schedule(
        name=safe_name(f"refresh_{obj.database}_{obj.schema}_{obj.name}"),
        cron_schedule=cron_for_interval(obj.refresh_every_ms),
        target=dg.AssetSelection.assets(asset_key(obj)),
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=f"REFRESH EVERY {obj.refresh_every_ms // 1000} s "
        "(skipped while tidemark serve maintains the view)",
    )
    def refresh(
        context: dg.ScheduleEvaluationContext, coordinator: CoordinatorResource
    ) -> dg.RunRequest | dg.SkipReason:
        with coordinator.open(spark=False) as opened:
            serving = operations.maintainer(opened)
        if serving is not None:
            return dg.SkipReason(f"{serving.holder} maintains {obj.name}")
        return dg.RunRequest()

    return refresh


def build_automation_sensor(project: Project) -> dg.AutomationConditionSensorDefinition | None:
    """Evaluates the eager condition of the on-commit views that read a view,
    running by default (Dagster's default_automation_condition_sensor, which
    it would otherwise add, starts switched off)."""
    objects = project.by_id()
    keys = [
        asset_key(obj)
        for obj in project.objects
        if is_on_commit_view(obj) and reads_a_view(obj, objects)
    ]
    if not keys:
        return None
    return dg.AutomationConditionSensorDefinition(
        AUTOMATION_SENSOR,
        target=dg.AssetSelection.assets(*keys),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=30,
        run_tags={"tidemark/trigger": "automation"},
        description="Runs the views refreshed on commit that read a view, when a view "
        "they read materializes (eager); new rows in tables and sources are the "
        "timestamp sensor's.",
    )
