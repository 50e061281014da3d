"""The timestamp-assignment sensor.

Each tick seals every table, webhook source and load generator at a fresh
timestamp (operations.assign_timestamps: writes only, no dataflow step, no
Spark), records the sources that advanced as asset observations, and asks
for one run of the views refreshed on commit whose inputs advanced past
them, plus the views downstream of those. The run key names each view with
the upper it will reach (`<view>@<upper>`), so a tick that sees the same
frontiers again requests nothing new; the cursor keeps the last upper
observed per source and the last upper requested per view.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import dagster as dg

from assets import Project, asset_key, is_on_commit_view
from coordinator_lib.adapter import operations
from coordinator_lib.adapter.operations import CatalogObject, Frontiers
from coordinator_lib.sql.catalog import ItemKind
from resources import CoordinatorResource

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import (
        UnresolvedAssetJobDefinition,
    )

__all__ = ["TICK_SECONDS", "TimestampCursor", "build_timestamp_sensor", "plan_tick"]

TICK_SECONDS = 30


@dataclass
class TimestampCursor:
    """Per asset (key string): the last upper observed (sources, tables)
    and the last upper a run was requested for (views)."""

    uppers: dict[str, int | None] = field(default_factory=dict)
    requested: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def parse(text: str | None) -> "TimestampCursor":
        if not text:
            return TimestampCursor()
        data = json.loads(text)
        return TimestampCursor(dict(data.get("uppers", {})), dict(data.get("requested", {})))

    def dumps(self) -> str:
        return json.dumps({"uppers": self.uppers, "requested": self.requested}, sort_keys=True)


@dataclass(frozen=True)
class TickPlan:
    observations: list[dg.AssetObservation]
    run_request: dg.RunRequest | None
    cursor: TimestampCursor


def plan_tick(
    objects: tuple[CatalogObject, ...],
    frontiers: Mapping[str, Frontiers | None],
    cursor: TimestampCursor,
) -> TickPlan:
    """What a tick reports and requests, from the frontiers it observed
    (keyed by asset key string; objects come in id order, inputs first)."""
    keys = {obj.id: asset_key(obj).to_user_string() for obj in objects}
    new = TimestampCursor(dict(cursor.uppers), dict(cursor.requested))
    observations = []
    for obj in objects:
        key = keys[obj.id]
        seen = frontiers.get(key)
        if obj.kind not in (ItemKind.SOURCE, ItemKind.TABLE) or seen is None:
            continue
        if key not in cursor.uppers or cursor.uppers[key] != seen.upper:
            observations.append(
                dg.AssetObservation(
                    asset_key=asset_key(obj),
                    metadata={
                        "since": dg.MetadataValue.int(seen.since)
                        if seen.since is not None
                        else dg.MetadataValue.null(),
                        "upper": dg.MetadataValue.int(seen.upper)
                        if seen.upper is not None
                        else dg.MetadataValue.null(),
                        "lag_ms": seen.lag_ms(),
                    },
                )
            )
        new.uppers[key] = seen.upper
    # The upper each view will reach: its inputs' least (projected) upper.
    projected: dict[str, int | None] = {k: (f.upper if f else None) for k, f in frontiers.items()}
    targets: dict[str, int] = {}
    selected = []
    for obj in objects:
        key = keys[obj.id]
        if not is_on_commit_view(obj) or frontiers.get(key) is None:
            continue
        inputs = [projected.get(keys[i]) for i in obj.inputs if i in keys]
        if not inputs or any(upper is None for upper in inputs):
            continue
        target = min(u for u in inputs if u is not None)
        own = frontiers[key]
        assert own is not None
        if own.upper is not None and target > own.upper and target > cursor.requested.get(key, 0):
            targets[key] = target
            selected.append(asset_key(obj))
            projected[key] = target
            new.requested[key] = target
    request = None
    if selected:
        run_key = ",".join(f"{key}@{target}" for key, target in sorted(targets.items()))
        request = dg.RunRequest(
            run_key=run_key, asset_selection=selected, tags={"tidemark/trigger": "timestamps"}
        )
    return TickPlan(observations, request, new)


def observe_all(coordinator: CoordinatorResource, project: Project) -> dict[str, Frontiers | None]:
    """Seal what timestamp assignment seals, then every object's frontiers
    (indexes excluded: their arrangements live in whatever process runs them)."""
    out: dict[str, Frontiers | None] = {}
    with coordinator.open(spark=False) as opened:
        operations.assign_timestamps(opened)
        for obj in project.objects:
            if obj.kind is ItemKind.INDEX:
                continue
            found = operations.find(opened, obj.database, obj.schema, obj.name)
            key = asset_key(obj).to_user_string()
            out[key] = operations.observe(opened, found) if found is not None else None
    return out


def build_timestamp_sensor(
    project: Project, job: "UnresolvedAssetJobDefinition | None"
) -> dg.SensorDefinition:
    @dg.sensor(
        name="tidemark_timestamps",
        minimum_interval_seconds=TICK_SECONDS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        job=job,
        description="Seals tables, webhook sources and load generators at a fresh timestamp; "
        "requests a run of the views whose inputs advanced.",
    )
    def tidemark_timestamps(
        context: dg.SensorEvaluationContext, coordinator: CoordinatorResource
    ) -> dg.SensorResult:
        frontiers = observe_all(coordinator, project)
        plan = plan_tick(project.objects, frontiers, TimestampCursor.parse(context.cursor))
        if plan.run_request is not None and job is None:  # pragma: no cover - no views
            plan = TickPlan(plan.observations, None, plan.cursor)
        return dg.SensorResult(
            run_requests=[plan.run_request] if plan.run_request is not None else [],
            asset_events=plan.observations,
            cursor=plan.cursor.dumps(),
        )

    return tidemark_timestamps
