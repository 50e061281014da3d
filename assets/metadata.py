"""What the UI shows about an object: column schema, column lineage and a
code reference on the definition; frontiers, row counts, timings and the
plan on every materialization."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import dagster as dg
import sqlglot
import sqlglot.errors

from assets.keys import asset_key
from coordinator_lib.adapter.operations.describe import CatalogObject
from coordinator_lib.adapter.operations.materialize import Materialization
from coordinator_lib.adapter.operations.project import Defined
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.sql.catalog import ItemKind

__all__ = [
    "INDEX_ARRANGEMENT",
    "MINIMUM_FRONTIER",
    "SERVED_ARRANGEMENT",
    "column_lineage",
    "column_schema",
    "data_version",
    "definition_metadata",
    "description",
    "frontier_ms",
    "frontier_time",
    "lineage_table",
    "materialization_metadata",
    "pretty_sql",
    "recorded_frontiers",
    "served_index_metadata",
    "step_cost_metadata",
    "step_kind",
]

KIND_LABELS = {
    "source": "Source",
    "table": "Table",
    "materialized-view": "Materialized view, maintained incrementally",
    "index": "Index (an arrangement kept in the Spark memory of tidemark serve)",
    "sink": "Sink (run by tidemark serve)",
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


def description(
    obj: CatalogObject,
    defined: Defined | None,
    objects: Mapping[GlobalId, CatalogObject] | None = None,
) -> str:
    """What the asset page says: the comment above the CREATE in the
    project's SQL, the kind, the SQL laid out, and where each column comes
    from (open-source Dagster does not draw column lineage, so it is a table)."""
    label = KIND_LABELS.get(obj.kind.value, obj.kind.value)
    if obj.refresh_every_ms is not None:
        label += f", refreshed every {obj.refresh_every_ms // 1000} s"
    prose = f"{defined.comment}\n\n" if defined is not None and defined.comment else ""
    text = f"{prose}{label}.\n\n```sql\n{pretty_sql(obj.create_sql)}\n```"
    table = lineage_table(obj, objects or {})
    return f"{text}\n\n{table}" if table else text


def lineage_table(obj: CatalogObject, objects: Mapping[GlobalId, CatalogObject]) -> str:
    """Column lineage as a Markdown table: each column and the input columns it is computed from."""
    rows = []
    for column, sources in obj.lineage.items():
        found = [f"`{objects[i].name}.{c}`" for i, c in sorted(sources, key=str) if i in objects]
        if found:
            rows.append(f"| `{column}` | {', '.join(found)} |")
    if not rows:
        return ""
    return "\n".join(["| column | computed from |", "| --- | --- |", *rows])


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


# An index's arrangement lives in the Spark memory of the process that
# maintains it. `tidemark serve` keeps every index of the catalog for as long
# as it runs (point lookups over pgwire read it); a Dagster run, which opens
# a coordinator of its own, only builds one to check it is readable when no
# server runs, and it goes when the run ends. A view's state is its durable
# output shard, so after its first step a view only catches up.
INDEX_ARRANGEMENT = (
    "no tidemark serve was running: this run built the index to check it is readable, and "
    "it went with the run; tidemark serve maintains it (and answers lookups from it) "
    "whenever it runs"
)
SERVED_ARRANGEMENT = "kept in the memory of tidemark serve, which answers lookups from it"


def served_index_metadata(
    since: int | None, upper: int | None, rows: int, lag_ms: int, maintainer: str
) -> dict[str, Any]:
    """An index as `tidemark serve` keeps it (its heartbeat's report): what
    the timestamp sensor reports and a run materializing it records."""
    return {
        "since": frontier_time(since),
        "upper": frontier_time(upper),
        "frontiers": frontier_text(since, upper),
        "lag_seconds": dg.MetadataValue.float(lag_ms / 1000),
        "dagster/row_count": dg.MetadataValue.int(rows),
        "maintained_by": maintainer,
        "arrangement": SERVED_ARRANGEMENT,
    }


def step_kind(m: Materialization) -> str:
    """`hydration` (the first step of a dataflow in this process: its
    inputs' snapshots at the as_of, then their updates), `catch-up` (only the
    inputs' updates since the output's upper), or `none` (nothing to do)."""
    if m.step_lower is None:
        return "none"
    return "hydration" if m.hydrated else "catch-up"


# The least time (Timestamp's minimum) as the UI shows it: a collection
# readable from the very beginning (a view hydrated at 0, a closed one whose
# read policy grants the minimum) is not "since Jan 1 1970".
MINIMUM_FRONTIER = "0 (the minimum time: every time is readable)"


def frontier_time(value_ms: int | None) -> dg.MetadataValue:
    """A frontier as a date in the UI (null: the empty frontier, closed for
    ever; text at the minimum time, which is no date)."""
    if value_ms is None:
        return dg.MetadataValue.null()
    if value_ms <= 0:
        return dg.MetadataValue.text(MINIMUM_FRONTIER)
    return dg.MetadataValue.timestamp(value_ms / 1000)


def frontier_ms(value: object) -> int | None:
    """A frontier back from recorded metadata: timestamp metadata (seconds),
    the minimum's text, or, in materializations recorded before them,
    integer milliseconds."""
    if value == MINIMUM_FRONTIER:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if isinstance(value, int) else round(value * 1000)


def frontier_text(since: int | None, upper: int | None) -> str:
    """The exact frontiers in milliseconds, for copying into AS OF or a query."""

    def text(value: int | None) -> str:
        return "closed" if value is None else f"{value} ms"

    return f"since {text(since)}, upper {text(upper)}"


def data_version(upper: int | None) -> dg.DataVersion:
    """Data versions follow the upper: a reader is stale exactly while an
    input's upper has moved past what the reader last took in."""
    return dg.DataVersion("closed" if upper is None else str(upper))


def pretty_sql(sql: str) -> str:
    """The SQL laid out on several lines (as written if sqlglot cannot)."""
    try:
        return sqlglot.transpile(sql, read="postgres", write="postgres", pretty=True)[0]
    except sqlglot.errors.SqlglotError:
        return sql


def materialization_metadata(
    m: Materialization, obj: CatalogObject, objects: Mapping[GlobalId, CatalogObject]
) -> dict[str, Any]:
    """Frontiers as dates; numbers that are worth a plot (lag, rows, step
    time) as floats and ints with their unit in the name; the rest as text."""
    stepped = obj.kind not in (ItemKind.MATERIALIZED_VIEW, ItemKind.INDEX) or (
        m.step_lower is not None
    )
    metadata: dict[str, Any] = {
        "since": frontier_time(m.since),
        "upper": frontier_time(m.upper),
        "previous_upper": frontier_time(m.previous_upper),
        "changes_from": frontier_time(m.changes_from),
        "frontiers": frontier_text(m.since, m.upper),
        "lag_seconds": dg.MetadataValue.float(m.lag_ms / 1000),
        "rows_inserted": m.rows_inserted,
        "rows_retracted": m.rows_retracted,
        "updates": m.updates,
        "rows_read": m.rows_read,
        "dagster/row_count": m.total_rows,
        "spark_seconds": dg.MetadataValue.float(round(m.spark_seconds, 3)),
        "step_seconds": dg.MetadataValue.float(round(m.seconds, 3)),
        "engine": m.engine if stepped else "no step (inputs no further than the upper)",
        "plan": dg.MetadataValue.md(f"```\n{m.plan}\n```"),
    }
    if m.step_lower is not None and m.step_upper is not None:
        metadata["step"] = f"[{m.step_lower}, {m.step_upper}) ms" + (
            " hydration" if m.hydrated else ""
        )
    if obj.kind in (ItemKind.MATERIALIZED_VIEW, ItemKind.INDEX):
        metadata["step_kind"] = step_kind(m)
    if obj.kind is ItemKind.INDEX:
        metadata["arrangement"] = INDEX_ARRANGEMENT
    if obj.kind is ItemKind.MATERIALIZED_VIEW:
        metadata.update(step_cost_metadata(m))
    lineage = column_lineage(obj, objects)
    if lineage is not None:
        metadata["dagster/column_lineage"] = lineage
    return metadata


def step_cost_metadata(m: Materialization) -> dict[str, Any]:
    """Why a view's step cost what it did: the rows it read from its inputs'
    updates (the delta), from inputs' whole old contents (snapshots: a
    hydration, or state rebuilt) and from the view's arranged state (only
    the keys the delta touches), and how big that state is after the step
    (as mz_internal.mz_arrangement_sizes counts it)."""
    metadata: dict[str, Any] = {}
    if m.state is not None:
        metadata["state_rows"] = dg.MetadataValue.int(m.state.rows)
        metadata["state_bytes"] = dg.MetadataValue.int(m.state.bytes)
    reads = m.reads
    if reads is not None:
        metadata["rows_read_from_delta"] = dg.MetadataValue.int(reads.delta)
        metadata["rows_read_from_snapshots"] = dg.MetadataValue.int(reads.snapshot)
        metadata["rows_read_from_state"] = dg.MetadataValue.int(reads.state)
        metadata["step_reads"] = (
            f"{reads.delta} input updates (the delta), {reads.snapshot} rows of inputs' "
            f"whole contents (snapshots), {reads.state} rows of arranged state "
            f"(the keys the delta touches), on the {m.engine} engine"
        )
    elif m.step_lower is not None:
        metadata["step_reads"] = (
            f"not counted: the step ran on {m.engine}, which reads its inputs' "
            "snapshots and updates and keeps no arranged state"
        )
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
        return frontier_ms(getattr(metadata.get(name), "value", None))

    return value("since"), value("upper")
