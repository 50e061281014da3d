"""Dagster sensors and schedules: timestamp assignment (which also runs the
views refreshed on commit whose storage inputs have new updates), the
automation sensor (which runs the on-commit views reading a view when a view
parent materializes: their eager condition), compaction, and the REFRESH
EVERY schedules. Sensors never start Spark (ticks time out at 60 s)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

from assets import Project, asset_key, is_on_commit_view
from sensors.compaction import build_compaction_sensor
from sensors.schedules import build_automation_sensor, build_refresh_schedules, cron_for_interval
from sensors.timestamps import TimestampCursor, build_timestamp_sensor, plan_tick

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import (
        UnresolvedAssetJobDefinition,
    )

__all__ = [
    "TimestampCursor",
    "build_automation_sensor",
    "build_compaction_sensor",
    "build_refresh_schedules",
    "build_sensors",
    "build_timestamp_sensor",
    "cron_for_interval",
    "plan_tick",
    "views_job",
]

VIEWS_JOB = "tidemark_views"


def views_job(project: Project) -> UnresolvedAssetJobDefinition | None:
    """The job the timestamp sensor runs: the views refreshed on commit."""
    keys = [asset_key(obj) for obj in project.objects if is_on_commit_view(obj)]
    if not keys:
        return None
    return dg.define_asset_job(VIEWS_JOB, selection=dg.AssetSelection.assets(*keys))


def build_sensors(
    project: Project, job: UnresolvedAssetJobDefinition | None
) -> list[dg.SensorDefinition]:
    sensors: list[dg.SensorDefinition] = [
        build_timestamp_sensor(project, job),
        build_compaction_sensor(project),
    ]
    automation = build_automation_sensor(project)
    if automation is not None:
        sensors.append(automation)
    return sensors
