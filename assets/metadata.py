"""What the UI shows about an object: column schema, column lineage and a
code reference on the definition; frontiers, row counts, timings and the
plan on every materialization."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import dagster as dg

from assets.keys import asset_key
from coordinator_lib.adapter.operations import CatalogObject, Defined, Materialization
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.sql.catalog import ItemKind

__all__ = [
    "INDEX_ARRANGEMENT",
    "column_lineage",
    "column_schema",
    "definition_metadata",
    "description",
    "materialization_metadata",
    "recorded_frontiers",
    "step_kind",
]

KIND_LABELS = {
    "source": "Source",
    "table": "Table",
    "materialized-view": "Materialized view, maintained incrementally",
    "index": "Index (an arrangement kept in the maintaining process's Spark memory)",
}


def column_schema(obj: CatalogObject) -> dg.TableSchema:
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                c.name, c.type, constraints=dg.TableColumnConstraints(nullable=c.nullable)
            )
            for c in obj.columns
        ]
    )


def column_lineage(
    obj: CatalogObject, objects: Mapping[GlobalId, CatalogObject]
) -> dg.TableColumnLineage | None:
    deps = {
        column: [
            dg.TableColumnDep(asset_key=asset_key(objects[input_id]), column_name=input_column)
            for input_id, input_column in sources
            if input_id in objects
        ]
        for column, sources in obj.lineage.items()
    }
    deps = {column: d for column, d in deps.items() if d}
    return dg.TableColumnLineage(deps_by_column=deps) if deps else None


def description(obj: CatalogObject, defined: Defined | None) -> str:
    label = KIND_LABELS.get(obj.kind.value, obj.kind.value)
    if obj.refresh_every_ms is not None:
        label += f", refreshed every {obj.refresh_every_ms // 1000} s"
    prose = f"{defined.comment}\n\n" if defined is not None and defined.comment else ""
    return f"{prose}{label}.\n\n```sql\n{obj.create_sql}\n```"


def definition_metadata(
    obj: CatalogObject,
    objects: Mapping[GlobalId, CatalogObject],
    defined: Defined | None,
    freshness_ms: int,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "tidemark/id": str(obj.id),
        "tidemark/freshness_ms": freshness_ms,
        "dagster/column_schema": column_schema(obj),
    }
    lineage = column_lineage(obj, objects)
    if lineage is not None:
        metadata["dagster/column_lineage"] = lineage
    if obj.index_key:
        metadata["tidemark/index_key"] = ", ".join(obj.index_key)
    if obj.refresh_every_ms is not None:
        metadata["tidemark/refresh_every_ms"] = obj.refresh_every_ms
    if defined is not None:
        with warnings.catch_warnings():  # code references are a beta API
            warnings.simplefilter("ignore", dg.BetaWarning)
            metadata["dagster/code_references"] = dg.CodeReferencesMetadataValue(
                code_references=[
                    dg.LocalFileCodeReference(
                        file_path=defined.path, line_number=defined.line, label=defined.name
                    )
                ]
            )
    return metadata


# Every Dagster run opens a coordinator of its own, and an index's
# arrangement lives in the Spark memory of the process that built it: so an
# index materialization always hydrates anew (reads its input's snapshot)
# and the arrangement goes when the run ends. A view's state is its durable
# output shard, so after its first step a view only catches up.
INDEX_ARRANGEMENT = (
    "built in this run's process and dropped when the run ends: every run hydrates it anew"
)


def step_kind(m: Materialization) -> str:
    """`hydration` (the first step of a dataflow in this process: its
    inputs' snapshots at the as_of, then their updates), `catch-up` (only the
    inputs' updates since the output's upper), or `none` (nothing to do)."""
    if m.step_lower is None:
        return "none"
    return "hydration" if m.hydrated else "catch-up"


def _int(value: int | None) -> dg.MetadataValue:
    return dg.MetadataValue.null() if value is None else dg.MetadataValue.int(value)


def materialization_metadata(
    m: Materialization, obj: CatalogObject, objects: Mapping[GlobalId, CatalogObject]
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "since": _int(m.since),
        "upper": _int(m.upper),
        "lag_ms": m.lag_ms,
        "rows_inserted": m.rows_inserted,
        "rows_retracted": m.rows_retracted,
        "updates": m.updates,
        "rows_read": m.rows_read,
        "total_rows": m.total_rows,
        "dagster/row_count": m.total_rows,
        "previous_upper": _int(m.previous_upper),
        "changes_from": _int(m.changes_from),
        "spark_seconds": dg.MetadataValue.float(round(m.spark_seconds, 3)),
        "seconds": dg.MetadataValue.float(round(m.seconds, 3)),
        "engine": m.engine,
        "plan": dg.MetadataValue.md(f"```\n{m.plan}\n```"),
    }
    if m.upper is not None:
        metadata["upper_time"] = dg.MetadataValue.timestamp(m.upper / 1000)
    if m.step_lower is not None and m.step_upper is not None:
        metadata["step"] = f"[{m.step_lower}, {m.step_upper})" + (
            " hydration" if m.hydrated else ""
        )
    if obj.kind in (ItemKind.MATERIALIZED_VIEW, ItemKind.INDEX):
        metadata["step_kind"] = step_kind(m)
    if obj.kind is ItemKind.INDEX:
        metadata["arrangement"] = INDEX_ARRANGEMENT
    lineage = column_lineage(obj, objects)
    if lineage is not None:
        metadata["dagster/column_lineage"] = lineage
    return metadata


def recorded_frontiers(
    instance: dg.DagsterInstance, key: dg.AssetKey
) -> tuple[int | None, int | None] | None:
    """(since, upper) of the asset's latest materialization, if any."""
    event = instance.get_latest_materialization_event(key)
    if event is None or event.asset_materialization is None:
        return None
    metadata = event.asset_materialization.metadata

    def value(name: str) -> int | None:
        entry = metadata.get(name)
        raw = getattr(entry, "value", None)
        return raw if isinstance(raw, int) else None

    return value("since"), value("upper")
