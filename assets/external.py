"""Assets of data that crosses Tidemark's edge: a PostgreSQL source's
subsources (one per upstream table) and the sinks.

- A PostgreSQL subsource is an observable source asset: `tidemark serve`
  (or a worker) replicates it; Dagster never writes it, it observes it.
  An observation records its frontiers, its lag behind the wall clock and
  its replication lag: the upstream's current WAL position minus the one
  the subsource has durably taken in (`replication_lag_bytes`).
- A sink is an asset downstream of what it reads. The server runs the
  sink; materializing the asset records the Iceberg table as it is: its
  latest snapshot id and the upper that commit brought it to (the view's
  contents before that time are in the table).
"""

from __future__ import annotations

import time

import dagster as dg

from assets.keys import asset_key, group_name
from assets.metadata import data_version, definition_metadata, description, frontier_time
from assets.project import Project
from coordinator_lib.adapter import operations
from coordinator_lib.adapter.coordinator import Coordinator
from coordinator_lib.adapter.operations.describe import CatalogObject
from coordinator_lib.repr.global_id import GlobalId
from resources import CoordinatorResource

__all__ = ["build_sink_asset", "build_subsource_asset"]


def _current(coordinator: CoordinatorResource, obj: CatalogObject) -> tuple[Coordinator, GlobalId]:
    from assets.factory import current_id

    opened = coordinator.coordinator()
    return opened, current_id(opened, obj)


def build_subsource_asset(obj: CatalogObject, project: Project) -> dg.AssetsDefinition:
    key = asset_key(obj)
    objects = project.by_id()
    spec = dg.AssetSpec(
        key,
        group_name=group_name(obj),
        kinds={"postgres", "source"},
        description=description(obj, project.definition(obj), objects),
        metadata=definition_metadata(
            obj, objects, project.definition(obj), project.freshness_of(obj)
        ),
    )

    @dg.multi_observable_source_asset(specs=[spec], name=f"observe_{key.to_python_identifier()}")
    def observe(coordinator: CoordinatorResource) -> dg.ObserveResult:
        opened, id = _current(coordinator, obj)
        frontiers = operations.observe(opened, id)
        lag = operations.replication_lag(opened, id)
        upper = frontiers.upper if frontiers is not None else None
        metadata: dict[str, dg.MetadataValue] = {
            "upper": frontier_time(upper),
            "lag_seconds": dg.MetadataValue.float(
                0.0 if upper is None else max(0.0, time.time() - upper / 1000)
            ),
            "committed_lsn": dg.MetadataValue.text(lag.committed_lsn or ""),
            "upstream_lsn": dg.MetadataValue.text(lag.upstream_lsn or ""),
        }
        if lag.lag_bytes is not None:
            metadata["replication_lag_bytes"] = dg.MetadataValue.int(lag.lag_bytes)
        if lag.error is not None:
            metadata["upstream_error"] = dg.MetadataValue.text(lag.error)
        return dg.ObserveResult(asset_key=key, metadata=metadata, data_version=data_version(upper))

    return observe


def build_sink_asset(obj: CatalogObject, project: Project) -> dg.AssetsDefinition:
    key = asset_key(obj)
    objects = project.by_id()

    @dg.asset(
        key=key,
        deps=[asset_key(objects[i]) for i in obj.inputs if i in objects],
        group_name=group_name(obj),
        kinds={"iceberg", "sink"},
        description=description(obj, project.definition(obj), objects),
        metadata={"tidemark/id": str(obj.id)},
    )
    def sink(coordinator: CoordinatorResource) -> dg.MaterializeResult:
        opened, id = _current(coordinator, obj)
        table = operations.iceberg_sink_table(opened, id)
        return dg.MaterializeResult(
            metadata={
                "iceberg_table": dg.MetadataValue.text(table.identifier),
                "snapshot_id": dg.MetadataValue.null()
                if table.snapshot_id is None
                else dg.MetadataValue.text(str(table.snapshot_id)),
                "upper": frontier_time(table.upper),
            },
            data_version=dg.DataVersion(str(table.snapshot_id)),
        )

    return sink
