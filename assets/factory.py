"""One Dagster asset per source, table, materialized view and index.

Materializing one goes through the coordinator (operations.materialize): a
source or table seals at the run's timestamp, a materialized view takes one
incremental step to its inputs' least upper (or the upper planned for it).
An index is the server's: while `tidemark serve` is live the run records
the index it keeps (once hydrated there, `served_index`); with no server
the run builds it in its own process to check it is readable, and the
arrangement goes with the run (assets/metadata.py says so).

Views refreshed on commit are run by two mechanisms, one per trigger. New
rows in a storage input (table, webhook source, load generator subsource):
the timestamp sensor (sensors/timestamps.py), which reads batch metadata
Dagster cannot see. A view parent materialized: the `ON_VIEW_PARENTS`
condition (eager, its dependency parts restricted to materialized views),
carried by the on-commit views that read a view and evaluated by the
`tidemark_automation` sensor. Sources and tables are never materialized in
Dagster, only sealed and observed, so eager's `any_deps_missing` and
`any_deps_updated` look at view parents only. REFRESH EVERY views have a
schedule.
"""

import json
import time
from collections.abc import Mapping
from datetime import timedelta

import dagster as dg

from assets.external import build_sink_asset, build_subsource_asset
from assets.keys import asset_key, group_name
from assets.metadata import (
    data_version,
    definition_metadata,
    description,
    materialization_metadata,
    recorded_frontiers,
    served_index_metadata,
)
from assets.project import Project
from coordinator_lib.adapter import operations
from coordinator_lib.adapter.coordinator import Coordinator
from coordinator_lib.adapter.maintainer import IndexState
from coordinator_lib.adapter.operations.describe import CatalogObject
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.sql.catalog import ItemKind
from resources import CoordinatorResource

__all__ = [
    "KINDS",
    "ON_VIEW_PARENTS",
    "TARGETS_TAG",
    "VIEWS",
    "build_asset",
    "current_id",
    "freshness_policy",
    "is_on_commit_view",
    "planned_upper",
    "reads_a_view",
    "reads_storage",
    "served_index",
    "served_index_state",
]

# Run tag: JSON {asset key string: upper} of the views a timestamp sensor
# run steps (runs of the automation sensor have none: each view steps to its
# inputs' least upper).
TARGETS_TAG = "tidemark/targets"

KINDS = {
    ItemKind.SOURCE: "source",
    ItemKind.TABLE: "table",
    ItemKind.MATERIALIZED_VIEW: "view",
    ItemKind.INDEX: "index",
    ItemKind.SINK: "sink",
}


# Every materialized view's asset (kind "view"), resolved when a condition
# is evaluated, so views created since the location loaded count too.
VIEWS = dg.AssetSelection.kind("view")

# Eager, with "a dependency updated" and "a dependency is missing" looking
# at view parents only: Dagster never materializes sources and tables (the
# timestamp sensor seals and observes them), so they would always count as
# missing. `~in_progress` and `~any_deps_in_progress` (every parent) are
# eager's own: no run while one stepping the view or a parent is under way.
ON_VIEW_PARENTS = (
    dg.AutomationCondition.eager()
    .replace("any_deps_updated", dg.AutomationCondition.any_deps_updated().allow(VIEWS))
    .replace("any_deps_missing", dg.AutomationCondition.any_deps_missing().allow(VIEWS))
    .with_label("eager (view parents)")
)


def is_on_commit_view(obj: CatalogObject) -> bool:
    """A materialized view refreshed whenever its inputs change (no REFRESH EVERY)."""
    return obj.kind is ItemKind.MATERIALIZED_VIEW and obj.refresh_every_ms is None


def reads_a_view(obj: CatalogObject, objects: Mapping[GlobalId, CatalogObject]) -> bool:
    """An input is a materialized view (`objects` by id)."""
    return any(objects[i].kind is ItemKind.MATERIALIZED_VIEW for i in obj.inputs if i in objects)


def reads_storage(obj: CatalogObject, objects: Mapping[GlobalId, CatalogObject]) -> bool:
    """An input is a table or a source (webhook, load generator subsource)."""
    return any(
        objects[i].kind in (ItemKind.SOURCE, ItemKind.TABLE) for i in obj.inputs if i in objects
    )


def current_id(coordinator: Coordinator, obj: CatalogObject) -> GlobalId:
    """The object's id in the catalog now: the code location may be older."""
    found = operations.find(coordinator, obj.database, obj.schema, obj.name)
    if found is None or coordinator.catalog.get(found).kind is not obj.kind:
        raise dg.Failure(
            f"{obj.database}.{obj.schema}.{obj.name} is no longer a {obj.kind.sql_name} in "
            "the catalog: reload the code location"
        )
    return found


def planned_upper(tags: Mapping[str, str], key: dg.AssetKey) -> int | None:
    """The upper the timestamp sensor planned for this asset in this run
    (the `tidemark/targets` tag), so that a view's step ends where the views
    reading it were planned to start; None in a run nobody planned."""
    text = tags.get(TARGETS_TAG)
    if not text:
        return None
    target = json.loads(text).get(key.to_user_string())
    return int(target) if target is not None else None


# How long a run waits for a live `tidemark serve` to hydrate an index
# (the server hydrates a new index in its next maintenance rounds).
SERVED_INDEX_WAIT_SECONDS = 120.0


def served_index_state(server: operations.Maintainer | None, id: GlobalId) -> IndexState | None:
    """Index `id` as the live server keeps it, once the server hydrated it."""
    state = server.indexes.get(str(id)) if server is not None else None
    return state if state is not None and state.hydrated else None


def served_index(
    coordinator: Coordinator,
    id: GlobalId,
    name: str,
    wait_seconds: float = SERVED_INDEX_WAIT_SECONDS,
) -> dg.MaterializeResult | None:
    """While `tidemark serve` is live the index is the one it keeps (its
    heartbeat reports it): the run waits until the server has hydrated it and
    records it as the server holds it, building nothing. None: no server."""
    deadline = time.monotonic() + wait_seconds
    while True:
        server = operations.maintainer(coordinator)
        if server is None:
            return None
        state = served_index_state(server, id)
        if state is not None:
            now_ms = int(time.time() * 1000)
            lag_ms = 0 if state.upper is None else max(0, now_ms - state.upper)
            return dg.MaterializeResult(
                metadata=served_index_metadata(
                    state.since, state.upper, state.rows, lag_ms, server.holder
                ),
                data_version=data_version(state.upper),
            )
        if time.monotonic() >= deadline:
            raise dg.Failure(
                f"index {name}: {server.holder} maintains this environment but has not "
                f"hydrated the index within {wait_seconds:.0f} s (see its log)"
            )
        time.sleep(1)


MIN_FRESHNESS_WINDOW = timedelta(minutes=1)  # Dagster refuses shorter windows


def freshness_policy(freshness_ms: int) -> dg.FreshnessPolicy:
    """Dagster's own freshness for a view: it fails once the view's last
    materialization (a run's step, or a step of `tidemark serve` the sensor
    reported) is older than the declared freshness (the frontier check's lag
    bound), and warns at half of it. Dagster takes windows of a minute or
    more, so a shorter freshness (tests) is rounded up to one minute (the
    frontier check still holds the exact bound). Tables and sources are
    sealed and observed, not materialized, so they carry none."""
    fail = max(timedelta(milliseconds=freshness_ms), MIN_FRESHNESS_WINDOW)
    warn = fail / 2 if fail / 2 >= MIN_FRESHNESS_WINDOW else None
    return dg.FreshnessPolicy.time_window(fail_window=fail, warn_window=warn)


def build_asset(obj: CatalogObject, project: Project) -> dg.AssetsDefinition:
    if obj.source_type == operations.POSTGRES:
        return build_subsource_asset(obj, project)
    if obj.kind is ItemKind.SINK:
        return build_sink_asset(obj, project)
    objects = project.by_id()
    key = asset_key(obj)
    seals = obj.kind in (ItemKind.SOURCE, ItemKind.TABLE)

    @dg.asset(
        key=key,
        deps=[asset_key(objects[i]) for i in obj.inputs if i in objects],
        group_name=group_name(obj),
        kinds={"spark", "sql", KINDS[obj.kind]},
        description=description(obj, project.definition(obj), objects),
        metadata=definition_metadata(
            obj, objects, project.definition(obj), project.freshness_of(obj)
        ),
        freshness_policy=(
            freshness_policy(project.freshness_of(obj))
            if obj.kind is ItemKind.MATERIALIZED_VIEW
            else None
        ),
        automation_condition=(
            ON_VIEW_PARENTS if is_on_commit_view(obj) and reads_a_view(obj, objects) else None
        ),
    )
    def materialize(
        context: dg.AssetExecutionContext, coordinator: CoordinatorResource
    ) -> dg.MaterializeResult:
        opened = coordinator.coordinator()
        if obj.kind is ItemKind.INDEX:
            served = served_index(opened, current_id(opened, obj), obj.name)
            if served is not None:
                context.log.info(f"{obj.name}: the index tidemark serve keeps")
                return served
        recorded = recorded_frontiers(context.instance, key)
        result = operations.materialize(
            opened,
            current_id(opened, obj),
            timestamp=coordinator.seal_timestamp() if seals else None,
            previous_upper=recorded[1] if recorded is not None else None,
            until=planned_upper(context.run.tags, key),
        )
        context.log.info(
            f"{obj.name}: upper {result.previous_upper} -> {result.upper}, "
            f"+{result.rows_inserted} -{result.rows_retracted} rows, "
            f"{result.rows_read} input updates read ({result.engine}, {result.seconds:.2f} s)"
        )
        return dg.MaterializeResult(
            metadata=materialization_metadata(result, obj, objects),
            data_version=data_version(result.upper),
        )

    return materialize
