"""The catalog as an orchestrator sees it: every source, table,
materialized view, index and sink with its storage-level inputs (plain views
inlined), columns, column lineage (`expr/lineage.py`), SQL and refresh
period."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from coordinator_lib.adapter.coordinator import Coordinator
from coordinator_lib.expr import relation as rel
from coordinator_lib.expr.lineage import column_lineage
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.sql.catalog import CatalogItem, ItemKind, QualifiedName
from coordinator_lib.sql.plan_postgres import CreatePostgresSourcePlan
from coordinator_lib.sql.plans import CreateViewPlan
from coordinator_lib.storage import StorageError
from coordinator_lib.storage.collection import DataSourceKind

# Kinds of catalog items an orchestrator sees (plain views are inlined).
ASSET_KINDS = (
    ItemKind.SOURCE,
    ItemKind.TABLE,
    ItemKind.MATERIALIZED_VIEW,
    ItemKind.INDEX,
    ItemKind.SINK,
)
# Who writes a source's collection (POSTGRES: a PostgreSQL source's subsource).
INGESTION, WEBHOOK, SUBSOURCES, POSTGRES = "load-generator", "webhook", "subsources", "postgres"


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    type: str
    nullable: bool


@dataclass(frozen=True)
class CatalogObject:
    """A source, table, materialized view or index as an orchestrator shows it.

    `inputs` are the storage collections it reads (plain views inlined; a
    subsource reads its parent source); `lineage` maps each output column to
    the (input, column) pairs it is computed from."""

    id: GlobalId
    kind: ItemKind
    database: str
    schema: str
    name: str
    inputs: tuple[GlobalId, ...]
    columns: tuple[ColumnInfo, ...]
    lineage: Mapping[str, tuple[tuple[GlobalId, str], ...]]
    create_sql: str
    refresh_every_ms: int | None = None
    source_type: str | None = None  # INGESTION, WEBHOOK, SUBSOURCES; None for non-sources
    index_key: tuple[str, ...] = ()

    @property
    def has_collection(self) -> bool:
        return self.kind not in (ItemKind.INDEX, ItemKind.SINK) and self.source_type != SUBSOURCES


def catalog_objects(coordinator: Coordinator) -> list[CatalogObject]:
    """Every user source, table, materialized view and index, in id order
    (so every object comes after its inputs)."""
    coordinator.refresh_catalog()
    catalog = coordinator.catalog
    out = []
    for item in catalog.items():
        if item.kind not in ASSET_KINDS:
            continue
        expr = defining_expr(coordinator, item)
        inputs: tuple[GlobalId, ...] = ()
        if expr is not None:
            inputs = tuple(sorted(i for i in expr.depends_on() if i.kind == "u"))
        elif item.kind in (ItemKind.SOURCE, ItemKind.SINK):
            inputs = tuple(sorted(i for i in item.depends_on if i.kind == "u"))
        lineage: dict[str, tuple[tuple[GlobalId, str], ...]] = {}
        if expr is not None:
            for name, sources in zip(item.desc.names, column_lineage(expr), strict=True):
                lineage[name] = tuple(
                    sorted((id, catalog.get(id).desc.names[c]) for id, c in sources)
                )
        plan = catalog.index.plans.get(catalog.entry(item.id).ids[0])
        out.append(
            CatalogObject(
                id=item.id,
                kind=item.kind,
                database=item.name.database,
                schema=item.name.schema,
                name=item.name.item,
                inputs=inputs,
                columns=tuple(
                    ColumnInfo(n, t.scalar_type.value, t.nullable)
                    for n, t in zip(item.desc.names, item.desc.types, strict=True)
                ),
                lineage=lineage,
                create_sql=catalog.entry(item.id).create_sql,
                refresh_every_ms=plan.refresh_every_ms
                if isinstance(plan, CreateViewPlan)
                else None,
                source_type=_source_type(coordinator, item),
                index_key=tuple(item.desc.names[i] for i in item.key or ()),
            )
        )
    return out


def find(coordinator: Coordinator, database: str, schema: str, name: str) -> GlobalId | None:
    """The id of the object named database.schema.name now (ids change when
    an object is dropped and created again), or None."""

    coordinator.refresh_catalog()
    item = coordinator.catalog.index.lookup(QualifiedName(database, schema, name))
    return None if item is None else item.id


def defining_expr(coordinator: Coordinator, item: CatalogItem) -> rel.RelationExpr | None:
    """What a view or index computes (an index of a collection: a Get of it)."""
    if item.kind is ItemKind.MATERIALIZED_VIEW:
        return item.expr
    if item.kind is ItemKind.INDEX and item.on is not None:
        on = coordinator.catalog.get(item.on)
        if on.kind is ItemKind.VIEW and on.expr is not None:
            return on.expr
        return rel.Get(on.id, on.desc)
    return None


def _source_type(coordinator: Coordinator, item: CatalogItem) -> str | None:
    if item.kind is not ItemKind.SOURCE:
        return None
    entry = coordinator.catalog.entry(item.id)
    plan = coordinator.catalog.index.plans.get(entry.ids[0])
    if isinstance(plan, CreatePostgresSourcePlan) and item.id != entry.ids[0]:
        return POSTGRES
    try:
        kind = coordinator.storage.collection(item.id).description.data_source.kind
    except StorageError:
        return SUBSOURCES  # a source whose rows live in its subsources
    return {DataSourceKind.INGESTION: INGESTION, DataSourceKind.WEBHOOK: WEBHOOK}.get(
        kind, str(kind)
    )
