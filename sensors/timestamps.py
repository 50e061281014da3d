"""The timestamp-assignment sensor: seals the storage collections and runs
the views refreshed on commit whose storage inputs have new rows.

Each tick seals every table, webhook source and load generator at a fresh
timestamp (operations.assign_timestamps: writes only, no dataflow step, no
Spark) and records the sources that advanced as asset observations. Sealing
moves every upper on every tick, so an advanced upper alone asks for
nothing: a view is requested when a storage input (table, webhook source,
load generator subsource) has *new updates* it has not taken in, which the
tick reads from the inputs' batch metadata (operations.update_spans: no data
read, no Spark). A view is requested when

- `new-rows`: a storage input has updates at or after the upper the view
  has, or a run requested earlier will give it;
- `hydrate`: it has never been computed (nothing readable) and no run was
  requested for it yet (any on-commit view: Dagster's "missing" is not
  Tidemark's);
- `freshness`: it reads a storage input and its upper (or the one
  requested) lags the wall clock by more than half its declared freshness,
  so an idle view's frontier check keeps passing.

One trigger, one owner: a view parent's new rows are not this sensor's.
On-commit views that read a view carry an eager condition
(assets/factory.py, ON_VIEW_PARENTS) and the `tidemark_automation` sensor
runs them when a view they read materializes, so this sensor never requests
a view because of the views below it. What it does step besides the
requested views is what lets the new rows reach every view: the on-commit
views upstream of a requested one (an idle view parent's upper only moves
when it is stepped; with no new rows the step is cheap), and the on-commit
views read by the views downstream of a requested one, so that when eager
steps those they find every input at the new time. Each view steps to the
upper planned here (the `tidemark/targets` run tag), not further. Eager
ignores a parent's update made by a run that also stepped the child (its
`executed_with_root_target`), so a view in this sensor's run is not stepped
again for it. A mixed view (a storage input and a view input) can still be
requested by both in a rare interleaving; that is safe: compare_and_append
on its upper decides and the later run's step is a no-op.

The run key names each requested view with the upper of the newest input
update it takes in (`<view>@<upper>`; the target upper if less): the same
new updates give the same key, so a tick evaluated again with an old cursor
asks for nothing Dagster has not seen, and new updates give a new key. The
cursor keeps the last upper observed per source and the upper each view was
last requested to reach.

Spans are counted whole, so a batch that straddles a view's upper counts as
new: at most one extra, cheap run. A failed run is not retried by the
sensor; the view's next new updates (or its freshness) request it again.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import dagster as dg
from dagster._core.definitions.data_version import (
    CODE_VERSION_TAG,
    DATA_VERSION_TAG,
    INPUT_DATA_VERSION_TAG_PREFIX,
    INPUT_EVENT_POINTER_TAG_PREFIX,
    NULL_EVENT_POINTER,
)

from assets import TARGETS_TAG, Project, asset_key, is_on_commit_view
from assets.metadata import data_version, frontier_text, frontier_time, served_index_metadata
from coordinator_lib.adapter import operations
from coordinator_lib.adapter.operations.describe import CatalogObject
from coordinator_lib.adapter.operations.frontiers import Frontiers, UpdateSpan, updates_in
from coordinator_lib.adapter.oracle import wall_clock_ms
from coordinator_lib.sql.catalog import ItemKind
from resources import CoordinatorResource

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import (
        UnresolvedAssetJobDefinition,
    )

    from coordinator_lib.adapter.maintainer import IndexState

__all__ = [
    "TICK_SECONDS",
    "Observed",
    "TickPlan",
    "TimestampCursor",
    "build_timestamp_sensor",
    "observe_all",
    "plan_tick",
]

TICK_SECONDS = 30
NEW_ROWS, HYDRATE, FRESHNESS = "new-rows", "hydrate", "freshness"


@dataclass
class TimestampCursor:
    """Per asset (key string): the last upper observed (sources, tables)
    and the last upper a run was requested to reach (views)."""

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
class Observed:
    """What a tick saw, by asset key string: frontiers (None: no such object
    now) and, for every collection, where its updates are."""

    frontiers: Mapping[str, Frontiers | None]
    spans: Mapping[str, Sequence[UpdateSpan]] = field(default_factory=dict)
    maintainer: str | None = None  # the live `tidemark serve` keeping the views fresh
    # Dagster's current data version of each table and source (its latest
    # materialization's), for the provenance of the server's reported steps.
    versions: Mapping[str, str] = field(default_factory=dict)
    # The indexes the live server keeps (its heartbeat's report).
    indexes: Mapping[str, "IndexState"] = field(default_factory=dict)


@dataclass(frozen=True)
class TickPlan:
    observations: list[dg.AssetObservation]
    run_request: dg.RunRequest | None
    cursor: TimestampCursor
    reasons: Mapping[str, str] = field(default_factory=dict)  # view key -> why requested
    reported: list[dg.AssetMaterialization] = field(default_factory=list)  # the server's steps


def _observations(
    objects: Sequence[CatalogObject], observed: Observed, cursor: TimestampCursor
) -> tuple[list[dg.AssetObservation], dict[str, int | None]]:
    """Sources and tables whose upper moved since the last tick, with the
    updates written in between."""
    observations = []
    uppers = dict(cursor.uppers)
    for obj in objects:
        key = asset_key(obj).to_user_string()
        seen = observed.frontiers.get(key)
        if obj.kind not in (ItemKind.SOURCE, ItemKind.TABLE) or seen is None:
            continue
        if key not in cursor.uppers or cursor.uppers[key] != seen.upper:
            metadata = {"since": frontier_time(seen.since), "upper": frontier_time(seen.upper)}
            metadata["lag_seconds"] = dg.MetadataValue.float(seen.lag_ms() / 1000)
            if obj.has_collection:
                new = updates_in(observed.spans.get(key, ()), cursor.uppers.get(key), seen.upper)
                metadata["new_updates"] = dg.MetadataValue.int(new)
            observations.append(dg.AssetObservation(asset_key=asset_key(obj), metadata=metadata))
        uppers[key] = seen.upper
    return observations, uppers


def _server_steps(
    objects: Sequence[CatalogObject],
    observed: Observed,
    cursor: TimestampCursor,
    uppers: dict[str, int | None],
) -> list[dg.AssetMaterialization]:
    """While `tidemark serve` maintains the views, each view whose upper
    moved since the last tick is reported as a materialization (no run):
    its frontiers, the updates it wrote since, and its data version (the
    upper). Records each reported upper in `uppers`."""
    keys = {obj.id: asset_key(obj).to_user_string() for obj in objects}
    by_id = {obj.id: obj for obj in objects}
    reported = []
    for obj in objects:
        key = keys[obj.id]
        seen = observed.frontiers.get(key)
        if obj.kind is not ItemKind.MATERIALIZED_VIEW or seen is None:
            continue
        before = cursor.uppers.get(key)
        if before is not None and before == seen.upper:
            continue
        written = updates_in(observed.spans.get(key, ()), before, seen.upper)
        # Provenance: the data version of each input this step took in (a
        # view input's is its upper, reported in this tick if it moved), so
        # Dagster's "Unsynced" compares uppers, as it does after a run.
        inputs: dict[str, str] = {}
        for input_id in obj.inputs:
            input_key = keys.get(input_id)
            if input_key is None:
                continue
            if by_id[input_id].kind is ItemKind.MATERIALIZED_VIEW:
                frontiers = observed.frontiers.get(input_key)
                if frontiers is not None:
                    inputs[input_key] = data_version(frontiers.upper).value
            elif input_key in observed.versions:
                inputs[input_key] = observed.versions[input_key]
        provenance = (
            {
                CODE_VERSION_TAG: "tidemark serve",
                **{f"{INPUT_DATA_VERSION_TAG_PREFIX}/{k}": v for k, v in inputs.items()},
                **{f"{INPUT_EVENT_POINTER_TAG_PREFIX}/{k}": NULL_EVENT_POINTER for k in inputs},
            }
            if len(inputs) == len([i for i in obj.inputs if i in keys])
            else {}
        )
        reported.append(
            dg.AssetMaterialization(
                asset_key=asset_key(obj),
                description=f"stepped by {observed.maintainer}",
                metadata={
                    "since": frontier_time(seen.since),
                    "upper": frontier_time(seen.upper),
                    "previous_upper": frontier_time(before),
                    "frontiers": frontier_text(seen.since, seen.upper),
                    "lag_seconds": dg.MetadataValue.float(seen.lag_ms() / 1000),
                    "updates": dg.MetadataValue.int(written),
                    "maintained_by": observed.maintainer,
                },
                tags={DATA_VERSION_TAG: data_version(seen.upper).value, **provenance},
            )
        )
        uppers[key] = seen.upper
    return reported


def _server_indexes(
    objects: Sequence[CatalogObject],
    observed: Observed,
    cursor: TimestampCursor,
    uppers: dict[str, int | None],
    now_ms: int,
) -> list[dg.AssetMaterialization]:
    """While `tidemark serve` maintains the environment, each index it has
    hydrated whose upper moved since the last tick is reported as a
    materialization (no run): its frontiers and rows as the server keeps
    it. Records each reported upper in `uppers`."""
    reported = []
    for obj in objects:
        key = asset_key(obj).to_user_string()
        state = observed.indexes.get(key)
        if obj.kind is not ItemKind.INDEX or state is None or not state.hydrated:
            continue
        if key in cursor.uppers and cursor.uppers[key] == state.upper:
            continue
        lag_ms = 0 if state.upper is None else max(0, now_ms - state.upper)
        assert observed.maintainer is not None
        reported.append(
            dg.AssetMaterialization(
                asset_key=asset_key(obj),
                description=f"kept by {observed.maintainer}",
                metadata={
                    **served_index_metadata(
                        state.since, state.upper, state.rows, lag_ms, observed.maintainer
                    ),
                    "previous_upper": frontier_time(cursor.uppers.get(key)),
                },
                tags={DATA_VERSION_TAG: data_version(state.upper).value},
            )
        )
        uppers[key] = state.upper
    return reported


def plan_tick(
    objects: Sequence[CatalogObject],
    observed: Observed,
    cursor: TimestampCursor,
    freshness_ms: Mapping[str, int] | None = None,
    now_ms: int | None = None,
) -> TickPlan:
    """What a tick reports and requests (see the module docstring). Objects
    come in id order, inputs first; `freshness_ms` (by key) enables the
    freshness reason."""
    keys = {obj.id: asset_key(obj).to_user_string() for obj in objects}
    frontiers = observed.frontiers
    freshness = freshness_ms or {}
    observations, uppers = _observations(objects, observed, cursor)
    now = wall_clock_ms() if now_ms is None else now_ms
    if observed.maintainer is not None:
        reported = _server_steps(objects, observed, cursor, uppers)
        reported += _server_indexes(objects, observed, cursor, uppers, now)
        return TickPlan(observations, None, TimestampCursor(uppers, {}), {}, reported)

    by_id = {obj.id: obj for obj in objects}
    views = [
        obj
        for obj in objects
        if is_on_commit_view(obj)
        and (f := frontiers.get(keys[obj.id])) is not None
        and f.upper is not None
    ]
    view_keys = {keys[obj.id] for obj in views}
    order = [keys[obj.id] for obj in views]  # inputs first
    # The on-commit views each one reads (the edges its eager condition follows).
    view_inputs = {
        keys[obj.id]: [keys[i] for i in obj.inputs if keys.get(i) in view_keys] for obj in views
    }
    storage = {
        keys[obj.id]: [
            keys[i]
            for i in obj.inputs
            if i in by_id and by_id[i].kind in (ItemKind.SOURCE, ItemKind.TABLE)
        ]
        for obj in views
    }
    # The upper each view has, or that a requested run will give it.
    covered: dict[str, int] = {}
    for obj in views:
        own = frontiers[keys[obj.id]]
        assert own is not None and own.upper is not None
        covered[keys[obj.id]] = max(own.upper, cursor.requested.get(keys[obj.id], own.upper))

    # Which views need a run, and the upper of the newest update they take in.
    # Only storage inputs count: a view parent's new rows are the automation
    # sensor's (eager) to follow.
    reasons: dict[str, str] = {}
    newest: dict[str, int] = {}
    for obj in views:
        key = keys[obj.id]
        own = frontiers[key]
        assert own is not None and own.upper is not None
        readable = own.since is not None and own.since < own.upper
        never = not readable and key not in cursor.requested
        lower = None if never else covered[key]  # None: any update at all is new
        found: int | None = None
        for input_key in storage[key]:
            for span in observed.spans.get(input_key, ()):
                if updates_in([span], lower):
                    end = span.upper if span.upper is not None else covered[key]
                    found = max(found or 0, end)
        if never:
            reasons[key], newest[key] = HYDRATE, own.upper
        elif found is not None:
            reasons[key], newest[key] = NEW_ROWS, found
        elif storage[key] and key in freshness and now - covered[key] > freshness[key] // 2:
            reasons[key], newest[key] = FRESHNESS, now

    def upstream(start: set[str]) -> set[str]:
        out = set(start)
        for key in reversed(order):
            if key in out:
                out.update(view_inputs[key])
        return out

    def downstream(start: set[str]) -> set[str]:
        out = set(start)
        for key in order:
            if any(i in out for i in view_inputs[key]):
                out.add(key)
        return out

    def stepped_for(requested: set[str]) -> set[str]:
        """The requested views and the on-commit views upstream of them, so
        they reach the time of their new rows; views downstream of those are
        left to eager, and the views those read step here too, so that they
        find every input there."""
        up = upstream(requested)
        down = downstream(requested) - up
        return up | (upstream(down) - down)

    def targets_for(stepped: set[str]) -> dict[str, int]:
        """Each stepped view reaches its inputs' least (projected) upper."""
        projected: dict[str, int | None] = {
            k: (f.upper if f else None) for k, f in frontiers.items()
        }
        projected.update(covered)
        targets: dict[str, int] = {}
        for obj in views:
            key = keys[obj.id]
            if key not in stepped:
                continue
            inputs = [projected.get(keys[i]) for i in obj.inputs if i in keys]
            open_inputs = [u for u in inputs if u is not None]
            if not inputs or not open_inputs or len(open_inputs) < len(inputs):
                continue  # an input is missing or closed: nothing to step to
            target = min(open_inputs)
            if target > covered[key]:
                targets[key] = target
                projected[key] = target
        return targets

    # A view with nothing to step to (its inputs are no further) is not run.
    reachable = targets_for(upstream(set(reasons)))
    chosen = {k: r for k, r in reasons.items() if k in reachable}
    new = TimestampCursor(uppers, dict(cursor.requested))
    request = None
    if chosen:
        stepped = stepped_for(set(chosen))
        targets = targets_for(stepped)  # the chosen views' are the same as above
        selected = stepped & set(targets)
        for key in selected:
            new.requested[key] = targets[key]
        run_key = ",".join(f"{k}@{min(targets[k], newest[k])}" for k in sorted(chosen))
        run = [asset_key(obj) for obj in views if keys[obj.id] in selected]
        request = dg.RunRequest(
            run_key=run_key,
            asset_selection=run,
            tags={
                "tidemark/trigger": "timestamps",
                "tidemark/reasons": ",".join(f"{k}:{r}" for k, r in sorted(chosen.items())),
                TARGETS_TAG: json.dumps({k: targets[k] for k in sorted(selected)}),
            },
        )
    return TickPlan(observations, request, new, chosen)


def observe_all(coordinator: CoordinatorResource, project: Project) -> Observed:
    """Seal what timestamp assignment seals, then every object's frontiers
    and every collection's update spans; an index's state only as a live
    server reports it (its arrangement lives in the server's memory)."""
    frontiers: dict[str, Frontiers | None] = {}
    spans: dict[str, tuple[UpdateSpan, ...]] = {}
    indexes = {}
    with coordinator.open(spark=False) as opened:
        serving = operations.maintainer(opened)
        operations.assign_timestamps(opened)
        for obj in project.objects:
            found = operations.find(opened, obj.database, obj.schema, obj.name)
            key = asset_key(obj).to_user_string()
            if obj.kind is ItemKind.INDEX:
                state = serving.indexes.get(str(found)) if serving and found else None
                if state is not None:
                    indexes[key] = state
                continue
            frontiers[key] = operations.observe(opened, found) if found is not None else None
            if found is not None and obj.has_collection:
                spans[key] = operations.update_spans(opened, found)
    return Observed(
        frontiers, spans, serving.holder if serving is not None else None, indexes=indexes
    )


def _data_versions(instance: dg.DagsterInstance, project: Project) -> dict[str, str]:
    """Dagster's current data version of each table and source."""
    versions = {}
    for obj in project.objects:
        if obj.kind not in (ItemKind.SOURCE, ItemKind.TABLE):
            continue
        event = instance.get_latest_materialization_event(asset_key(obj))
        materialization = event.asset_materialization if event is not None else None
        version = materialization.tags.get(DATA_VERSION_TAG) if materialization else None
        if version is not None:
            versions[asset_key(obj).to_user_string()] = version
    return versions


def build_timestamp_sensor(
    project: Project, job: "UnresolvedAssetJobDefinition | None"
) -> dg.SensorDefinition:
    freshness = {
        asset_key(obj).to_user_string(): project.freshness_of(obj)
        for obj in project.objects
        if is_on_commit_view(obj)
    }

    @dg.sensor(
        name="tidemark_timestamps",
        minimum_interval_seconds=TICK_SECONDS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        job=job,
        description="Seals tables, webhook sources and load generators at a fresh timestamp; "
        "requests a run of the views refreshed on commit whose tables or sources have new "
        "updates (views over views follow by eager, tidemark_automation).",
    )
    def tidemark_timestamps(
        context: dg.SensorEvaluationContext, coordinator: CoordinatorResource
    ) -> dg.SensorResult:
        observed = observe_all(coordinator, project)
        if observed.maintainer is not None:
            observed = replace(observed, versions=_data_versions(context.instance, project))
        plan = plan_tick(
            project.objects, observed, TimestampCursor.parse(context.cursor), freshness
        )
        if plan.run_request is not None and job is None:  # pragma: no cover - no views
            plan = TickPlan(plan.observations, None, plan.cursor)
        if plan.reasons:
            context.log.info(
                "requesting "
                + ", ".join(f"{key} ({reason})" for key, reason in sorted(plan.reasons.items()))
            )
        return dg.SensorResult(
            run_requests=[plan.run_request] if plan.run_request is not None else [],
            asset_events=[*plan.observations, *plan.reported],
            cursor=plan.cursor.dumps(),
        )

    return tidemark_timestamps
