"""One Dagster asset per source, table, materialized view and index.

Materializing one goes through the coordinator (operations.materialize): a
source or table seals at the run's timestamp, a materialized view takes one
incremental step to its inputs' least upper (or the upper planned for it),
an index hydrates its arrangement in the run's process (anew in every run:
each run opens its own coordinator; assets/metadata.py says so).

Views refreshed on commit carry no automation condition: the timestamp
sensor (sensors/timestamps.py) is the one thing that requests them, when
their inputs have new updates; REFRESH EVERY views have a schedule. (An
eager condition as well would run them twice: once on the sensor's request,
once when Dagster sees their inputs materialized.)
"""

import json
from collections.abc import Mapping

import dagster as dg

from assets.keys import asset_key, group_name
from assets.metadata import (
    definition_metadata,
    description,
    materialization_metadata,
    recorded_frontiers,
)
from assets.project import Project
from coordinator_lib.adapter import operations
from coordinator_lib.adapter.coordinator import Coordinator
from coordinator_lib.adapter.operations import CatalogObject
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.sql.catalog import ItemKind
from resources import CoordinatorResource

__all__ = [
    "KINDS",
    "TARGETS_TAG",
    "build_asset",
    "current_id",
    "is_on_commit_view",
    "planned_upper",
]

# Run tag: JSON {asset key string: upper} of the views a sensor run steps.
TARGETS_TAG = "tidemark/targets"

KINDS = {
    ItemKind.SOURCE: "source",
    ItemKind.TABLE: "table",
    ItemKind.MATERIALIZED_VIEW: "view",
    ItemKind.INDEX: "index",
}


def is_on_commit_view(obj: CatalogObject) -> bool:
    """A materialized view refreshed whenever its inputs change (no REFRESH EVERY)."""
    return obj.kind is ItemKind.MATERIALIZED_VIEW and obj.refresh_every_ms is None


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


def build_asset(obj: CatalogObject, project: Project) -> dg.AssetsDefinition:
    objects = project.by_id()
    key = asset_key(obj)
    seals = obj.kind in (ItemKind.SOURCE, ItemKind.TABLE)

    @dg.asset(
        key=key,
        deps=[asset_key(objects[i]) for i in obj.inputs if i in objects],
        group_name=group_name(obj),
        kinds={"spark", "sql", KINDS[obj.kind]},
        description=description(obj, project.definition(obj)),
        metadata=definition_metadata(
            obj, objects, project.definition(obj), project.freshness_of(obj)
        ),
    )
    def materialize(
        context: dg.AssetExecutionContext, coordinator: CoordinatorResource
    ) -> dg.MaterializeResult:
        opened = coordinator.coordinator()
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
        return dg.MaterializeResult(metadata=materialization_metadata(result, obj, objects))

    return materialize
