"""System relations: the catalog, frontiers and the statement log as SQL.

Each is a catalog item with a system id (`s1`, ...) in `mz_catalog` or
`mz_internal` (resolvable unqualified from any database, like Materialize's).
They have no shard: when a query names one, the adapter computes its rows
from the coordinator's state at that moment (`system_rows`) and plans the
query over them as a constant.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from coordinator_lib.adapter import postgres_source, privileges
from coordinator_lib.adapter.catalog import system_item
from coordinator_lib.adapter.cursor import PG_CURSORS_COLUMNS, pg_cursors_rows
from coordinator_lib.adapter.information_schema import (
    INFORMATION_SCHEMA_COLUMNS,
    INFORMATION_SCHEMA_TABLES,
    columns_rows,
    tables_rows,
)
from coordinator_lib.adapter.pg_attribute import (
    EMPTY_CATALOGS,
    PG_ATTRIBUTE_COLUMNS,
    pg_attribute_rows,
)
from coordinator_lib.adapter.pg_catalog import PG_TYPE_COLUMNS, pg_type_rows
from coordinator_lib.adapter.pg_class import (
    PG_CLASS_COLUMNS,
    PG_NAMESPACE_COLUMNS,
    pg_class_rows,
    pg_namespace_rows,
)
from coordinator_lib.compute.arranged import state_sizes
from coordinator_lib.compute.error_collection import errors_at
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.sql.catalog import CatalogItem, ItemKind
from coordinator_lib.sql.plan_webhook import CreateWebhookSourcePlan

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator

Row = tuple[Any, ...]

_NAME = ("database_name", "text"), ("schema_name", "text"), ("name", "text", False)
_RELATIONS: list[tuple[str, str, RelationDesc]] = [
    ("mz_catalog", "mz_databases", RelationDesc.of(("name", "text", False))),
    (
        "mz_catalog",
        "mz_schemas",
        RelationDesc.of(("database_name", "text", False), ("name", "text", False)),
    ),
    (
        "mz_catalog",
        "mz_objects",
        RelationDesc.of(("id", "text", False), *_NAME, ("type", "text", False)),
    ),
    ("mz_catalog", "mz_tables", RelationDesc.of(("id", "text", False), *_NAME)),
    ("mz_catalog", "mz_sources", RelationDesc.of(("id", "text", False), *_NAME)),
    ("mz_catalog", "mz_views", RelationDesc.of(("id", "text", False), *_NAME)),
    ("mz_catalog", "mz_materialized_views", RelationDesc.of(("id", "text", False), *_NAME)),
    (
        "mz_catalog",
        "mz_indexes",
        RelationDesc.of(("id", "text", False), *_NAME, ("on_id", "text", False)),
    ),
    (
        "mz_catalog",
        "mz_columns",
        RelationDesc.of(
            ("id", "text", False),
            ("name", "text", False),
            ("position", "bigint", False),
            ("nullable", "boolean", False),
            ("type", "text", False),
        ),
    ),
    (
        "mz_catalog",
        "mz_clusters",
        RelationDesc.of(("name", "text", False), ("replication_factor", "bigint", False)),
    ),
    (
        "mz_internal",
        "mz_object_dependencies",
        RelationDesc.of(("object_id", "text", False), ("referenced_object_id", "text", False)),
    ),
    (
        "mz_internal",
        "mz_frontiers",
        RelationDesc.of(
            ("object_id", "text", False),
            ("read_frontier", "bigint"),
            ("write_frontier", "bigint"),
        ),
    ),
    (
        "mz_internal",
        "mz_statement_log",
        RelationDesc.of(
            ("id", "bigint", False),
            ("session_id", "bigint", False),
            ("sql", "text", False),
            ("began_at", "timestamp with time zone", False),
            ("duration_ms", "double precision"),
            ("status", "text", False),
            ("error_message", "text"),
            ("execution_timestamp", "bigint"),
            ("execution_strategy", "text"),
        ),
    ),
    (
        "mz_internal",
        "mz_sessions",
        RelationDesc.of(
            ("id", "bigint", False),
            ("user", "text", False),
            ("connected_at", "timestamp with time zone", False),
        ),
    ),
    # Each materialized view's errors at its newest complete time (its error
    # collection, compute/error_collection.py): one row per distinct error.
    (
        "mz_internal",
        "mz_compute_error_counts",
        RelationDesc.of(
            ("object_id", "text", False),
            ("name", "text", False),
            ("code", "text", False),
            ("error", "text", False),
            ("count", "bigint", False),
        ),
    ),
    # Each materialized view's arranged operator state on this host
    # (compute/arranged.py): entries and encoded bytes per operator.
    (
        "mz_internal",
        "mz_arrangement_sizes",
        RelationDesc.of(
            ("object_id", "text", False),
            ("name", "text", False),
            ("operator", "text", False),
            ("records", "bigint", False),
            ("size", "bigint", False),
        ),
    ),
    ("mz_catalog", "mz_secrets", RelationDesc.of(("id", "text", False), *_NAME)),
    # Roles and privileges (adapter/privileges.py).
    ("mz_catalog", "mz_roles", RelationDesc.of(*privileges.ROLE_COLUMNS)),
    ("pg_catalog", "pg_roles", RelationDesc.of(*privileges.PG_ROLES_COLUMNS)),
    ("mz_internal", "mz_show_all_privileges", RelationDesc.of(*privileges.PRIVILEGE_COLUMNS)),
    (
        "mz_internal",
        "mz_webhook_sources",
        RelationDesc.of(("id", "text", False), ("name", "text", False), ("url", "text", False)),
    ),
    # What client libraries look up when they connect (adapter/pg_catalog.py).
    ("pg_catalog", "pg_type", RelationDesc.of(*PG_TYPE_COLUMNS)),
    # What SQLAlchemy's has_table (pandas to_sql) asks (adapter/pg_class.py).
    ("pg_catalog", "pg_namespace", RelationDesc.of(*PG_NAMESPACE_COLUMNS)),
    ("pg_catalog", "pg_class", RelationDesc.of(*PG_CLASS_COLUMNS)),
    # What psql's describe commands read (adapter/pg_attribute.py).
    ("pg_catalog", "pg_attribute", RelationDesc.of(*PG_ATTRIBUTE_COLUMNS)),
    *(("pg_catalog", name, RelationDesc.of(*cols)) for name, cols in EMPTY_CATALOGS.items()),
    # The SQL standard's views (adapter/information_schema.py).
    ("information_schema", "tables", RelationDesc.of(*INFORMATION_SCHEMA_TABLES)),
    ("information_schema", "columns", RelationDesc.of(*INFORMATION_SCHEMA_COLUMNS)),
    ("pg_catalog", "pg_cursors", RelationDesc.of(*PG_CURSORS_COLUMNS)),
    # PostgreSQL sources' state (adapter/postgres_source.py).
    ("mz_internal", "mz_source_statuses", RelationDesc.of(*postgres_source.STATUS_COLUMNS)),
    # The latest steps (up to RECENT_STEPS each) of the dataflows this
    # process runs, and what each read: its inputs' updates (the delta), rows
    # of inputs' whole contents (snapshots) and rows of arranged state. Null
    # reads: a Spark step, which does not count them.
    (
        "mz_internal",
        "mz_dataflow_step_reads",
        RelationDesc.of(
            ("object_id", "text", False),
            ("name", "text", False),
            ("lower", "bigint", False),
            ("upper", "bigint", False),
            ("engine", "text", False),
            ("rows_from_delta", "bigint"),
            ("rows_from_snapshot", "bigint"),
            ("rows_from_state", "bigint"),
            ("rows_written", "bigint", False),
            ("seconds", "double precision", False),
        ),
    ),
]

SYSTEM_ITEMS: list[CatalogItem] = [
    system_item(i + 1, schema, name, desc) for i, (schema, name, desc) in enumerate(_RELATIONS)
]
_KIND_NAMES = {
    ItemKind.TABLE: "table",
    ItemKind.SOURCE: "source",
    ItemKind.VIEW: "view",
    ItemKind.MATERIALIZED_VIEW: "materialized-view",
    ItemKind.INDEX: "index",
    ItemKind.SECRET: "secret",
    ItemKind.CONTINUAL_TASK: "continual-task",
    ItemKind.CONNECTION: "connection",
    ItemKind.SINK: "sink",
}


def _named(item: CatalogItem) -> Row:
    return (str(item.id), item.name.database, item.name.schema, item.name.item)


def _of_kind(kind: ItemKind) -> Callable[[Coordinator], list[Row]]:
    return lambda coord: [_named(i) for i in coord.catalog.items() if i.kind is kind]


def _objects(coord: Coordinator) -> list[Row]:
    return [(*_named(i), _KIND_NAMES[i.kind]) for i in coord.catalog.items()]


def _columns(coord: Coordinator) -> list[Row]:
    rows = []
    for item in coord.catalog.items():
        if item.kind is ItemKind.INDEX:
            continue
        for n, (name, column) in enumerate(zip(item.desc.names, item.desc.types, strict=True)):
            rows.append((str(item.id), name, n + 1, column.nullable, column.scalar_type.value))
    return rows


def _dependencies(coord: Coordinator) -> list[Row]:
    return [(str(item.id), str(dep)) for item in coord.catalog.items() for dep in item.depends_on]


def _frontiers(coord: Coordinator) -> list[Row]:
    rows = []
    for item in coord.catalog.items():
        frontiers = coord.frontiers_of(item.id)
        if frontiers is not None:
            since, upper = frontiers
            rows.append((str(item.id), since.time, upper.time))
    return rows


def _error_counts(coord: Coordinator) -> list[Row]:
    rows = []
    for item in coord.catalog.items():
        frontiers = coord.frontiers_of(item.id)
        if item.kind is not ItemKind.MATERIALIZED_VIEW or frontiers is None:
            continue
        upper = frontiers[1].time
        if upper is None or upper == 0:
            continue
        for code, message, count in errors_at(coord.storage.shard(item.id), upper - 1):
            rows.append((str(item.id), item.name.item, code, message, count))
    return rows


def _arrangement_sizes(coord: Coordinator) -> list[Row]:
    rows = []
    for item in coord.catalog.items():
        if item.kind is not ItemKind.MATERIALIZED_VIEW or coord.frontiers_of(item.id) is None:
            continue
        for operator, size in state_sizes(coord.storage.shard(item.id)).items():
            rows.append((str(item.id), item.name.item, operator, size.rows, size.bytes))
    return rows


def _step_reads(coord: Coordinator) -> list[Row]:
    steps = coord.compute.recent_steps()
    rows = []
    for item in coord.catalog.items():
        for step in steps.get(item.id, ()):
            reads = step.reads
            rows.append(
                (
                    str(item.id),
                    item.name.item,
                    step.lower,
                    step.upper,
                    str(step.engine),
                    None if reads is None else reads.delta,
                    None if reads is None else reads.snapshot,
                    None if reads is None else reads.state,
                    step.rows_written,
                    step.seconds,
                )
            )
    return rows


def _webhook_sources(coord: Coordinator) -> list[Row]:
    """Webhook sources and the path they take requests on (HTTP port 6876)."""
    plans = coord.catalog.index.plans
    return [
        (
            str(i.id),
            i.name.item,
            "/api/webhook/" + "/".join(quote(p, safe="") for p in i.name.parts),
        )
        for i in coord.catalog.items()
        if isinstance(plans.get(i.id), CreateWebhookSourcePlan)
    ]


def _statement_log(coord: Coordinator) -> list[Row]:
    return [
        (
            r.id,
            r.session_id,
            r.sql,
            r.began_at,
            r.duration_ms,
            r.status,
            r.error_message,
            r.execution_timestamp,
            r.execution_strategy,
        )
        for r in coord.statement_log.records()
    ]


def _sessions(coord: Coordinator) -> list[Row]:
    return [
        (s.id, s.user, dt.datetime.fromtimestamp(s.connected_at, dt.UTC)) for s in coord.sessions()
    ]


_ROWS: dict[str, Callable[[Coordinator], list[Row]]] = {
    "mz_databases": lambda coord: [(d,) for d in coord.catalog.databases()],
    "mz_schemas": lambda coord: list(coord.catalog.schemas()),
    "mz_objects": _objects,
    "mz_tables": _of_kind(ItemKind.TABLE),
    "mz_sources": _of_kind(ItemKind.SOURCE),
    "mz_views": _of_kind(ItemKind.VIEW),
    "mz_materialized_views": _of_kind(ItemKind.MATERIALIZED_VIEW),
    "mz_indexes": lambda coord: [
        (*_named(i), str(i.on)) for i in coord.catalog.items() if i.kind is ItemKind.INDEX
    ],
    "mz_columns": _columns,
    "mz_clusters": lambda coord: [
        (name, spec.get("replication_factor", 1)) for name, spec in coord.catalog.clusters().items()
    ],
    "mz_object_dependencies": _dependencies,
    "mz_frontiers": _frontiers,
    "mz_compute_error_counts": _error_counts,
    "mz_arrangement_sizes": _arrangement_sizes,
    "mz_dataflow_step_reads": _step_reads,
    "mz_statement_log": _statement_log,
    "mz_sessions": _sessions,
    "mz_secrets": _of_kind(ItemKind.SECRET),
    "mz_roles": privileges.mz_roles_rows,
    "pg_roles": privileges.pg_roles_rows,
    "mz_show_all_privileges": privileges.mz_privileges_rows,
    "mz_webhook_sources": _webhook_sources,
    "pg_type": lambda coord: pg_type_rows(),
    "pg_namespace": pg_namespace_rows,
    "pg_class": pg_class_rows,
    "pg_attribute": pg_attribute_rows,
    **{name: (lambda coord: []) for name in EMPTY_CATALOGS},
    "tables": tables_rows,
    "columns": columns_rows,
    "pg_cursors": pg_cursors_rows,
    "mz_source_statuses": postgres_source.status_rows,
}


def system_rows(coord: Coordinator, item: CatalogItem) -> list[Row]:
    """The current rows of system relation `item`."""
    return _ROWS[item.name.item](coord)
