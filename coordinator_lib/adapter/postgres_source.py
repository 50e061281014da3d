"""PostgreSQL sources in the adapter: purification at CREATE, the running
ingestion per source, DROP, and the errors of stopped subsources.

CREATE SOURCE asks the upstream server what the statement means (which
tables the publication has, their columns and types, their replica
identity) and stores the purified statement (`sql/plan_postgres.py`), so
every later re-plan is offline. Anything the source could not replicate is
refused there, with nothing created: a missing publication or table (42704
/ 42P01), a table without REPLICA IDENTITY FULL (55000: its UPDATEs and
DELETEs would not carry the old row), a column type Tidemark has no type
for (0A000).

A background coordinator (`tidemark serve`) runs each source's ingestion
(`storage/postgres_source.py`) in a thread; other processes (Dagster runs)
only read its subsources. Dropping the source stops the thread, drops the
replication slot upstream and forgets the progress record.
"""

from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coordinator_lib.adapter import clusters
from coordinator_lib.adapter.catalog import Catalog, SessionCatalog
from coordinator_lib.adapter.connections import (
    connect,
    connection_plan,
    conninfo_of,
    store_item,
    stored_conninfo,
)
from coordinator_lib.adapter.errors import AdapterError, AdapterNotice
from coordinator_lib.adapter.responses import ExecuteResponse
from coordinator_lib.adapter.responses import ExecuteResponseKind as Kind
from coordinator_lib.adapter.secrets_key import configured_key
from coordinator_lib.adapter.session import Session
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.repr.timestamp import now_ms
from coordinator_lib.sql.catalog import CatalogItem, QualifiedName
from coordinator_lib.sql.coercion import parse_text_as
from coordinator_lib.sql.plan import plan_statement
from coordinator_lib.sql.plan_postgres import CreateConnectionPlan, CreatePostgresSourcePlan
from coordinator_lib.storage.collection import CollectionDescription, DataSource
from coordinator_lib.storage.postgres_source import (
    PG_TYPES,
    PostgresIngestion,
    PostgresIngestionSpec,
    UpstreamColumn,
    UpstreamTable,
    drop_slot,
    mark_dropped,
    quote_ident,
    read_progress,
)

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator

log = logging.getLogger(__name__)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# --- CREATE SOURCE: purification ------------------------------------------------------


@dataclass(frozen=True)
class _Upstream:
    schema: str
    name: str
    columns: tuple[tuple[str, ScalarType, bool], ...]  # name, type, nullable


def _published(conn: Any, publication: str) -> list[tuple[str, str]]:
    if (
        conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (publication,)).fetchone()
        is None
    ):
        raise AdapterError(f'publication "{publication}" does not exist upstream', code="42704")
    rows = conn.execute(
        "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s ORDER BY 1, 2",
        (publication,),
    ).fetchall()
    return [(str(s), str(t)) for s, t in rows]


def _selected(
    plan: CreatePostgresSourcePlan, published: list[tuple[str, str]]
) -> list[tuple[tuple[str, str], QualifiedName]]:
    """(upstream schema and table, subsource name) of each table the statement names."""
    if plan.all_tables or plan.schemas:
        chosen = [t for t in published if plan.all_tables or t[0] in plan.schemas]
        if not chosen:
            raise AdapterError(
                f'publication "{plan.publication}" has no tables'
                + (f" in schemas {', '.join(plan.schemas)}" if plan.schemas else ""),
                code="42P01",
            )
        return [(t, QualifiedName(plan.name.database, plan.name.schema, t[1])) for t in chosen]
    selected = []
    for entry in plan.tables:
        matches = [
            t
            for t in published
            if t[1] == entry.upstream[-1]
            and (len(entry.upstream) == 1 or t[0] == entry.upstream[-2])
        ]
        shown = ".".join(entry.upstream)
        if not matches:
            raise AdapterError(
                f'table "{shown}" is not in publication "{plan.publication}"', code="42P01"
            )
        if len(matches) > 1:
            raise AdapterError(
                f'table name "{shown}" is ambiguous in publication "{plan.publication}" '
                "(qualify it with its schema)",
                code="42P09",
            )
        assert entry.name is not None
        selected.append((matches[0], entry.name))
    return selected


def _describe(conn: Any, schema: str, table: str) -> _Upstream:
    replident = conn.execute(
        "SELECT c.relreplident FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = %s",
        (schema, table),
    ).fetchone()
    shown = f"{schema}.{table}"
    if replident is None or replident[0] != "f":
        raise AdapterError(
            f'table "{shown}" does not have REPLICA IDENTITY FULL: its UPDATEs and DELETEs '
            "would not carry the old row",
            code="55000",
            hint=f"Run ALTER TABLE {quote_ident(schema)}.{quote_ident(table)} "
            "REPLICA IDENTITY FULL upstream.",
        )
    rows = conn.execute(
        "SELECT a.attname, a.atttypid::int, format_type(a.atttypid, a.atttypmod), a.attnotnull"
        " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped"
        " ORDER BY a.attnum",
        (schema, table),
    ).fetchall()
    columns = []
    for name, oid, type_name, not_null in rows:
        scalar = PG_TYPES.get(oid)
        if scalar is None:
            raise AdapterError(
                f'column "{name}" of table "{shown}" has type {type_name}, which is not supported',
                code="0A000",
            )
        columns.append((str(name), scalar, not not_null))
    return _Upstream(schema, table, tuple(columns))


def purify(coord: Coordinator, plan: CreatePostgresSourcePlan) -> tuple[str, int]:
    """The statement to store (every table with its columns, a new slot's
    name) and how many ids it takes."""
    conninfo = conninfo_of(coord, connection_plan(coord, plan.connection))
    with connect(conninfo) as conn:
        selected = _selected(plan, _published(conn, plan.publication))
        upstream = [_describe(conn, schema, table) for (schema, table), _ in selected]
    names = [name for _, name in selected]
    for name in names:
        if names.count(name) > 1:
            raise AdapterError(f"two upstream tables would be subsource '{name}'", code="42710")
        if coord.catalog.index.lookup(name) is not None:
            raise AdapterError(f"catalog item '{name}' already exists", code="42P07")
    connection = coord.catalog.get(plan.connection).name
    tables = []
    for table, name in zip(upstream, names, strict=True):
        columns = ", ".join(
            f"{quote_ident(c)} {t.value}{'' if nullable else ' NOT NULL'}"
            for c, t, nullable in table.columns
        )
        tables.append(
            f"{quote_ident(table.schema)}.{quote_ident(table.name)} ({columns}) AS {name}"
        )
    slot = f"tidemark_{uuid.uuid4().hex[:24]}"
    cluster = f" IN CLUSTER {quote_ident(plan.cluster)}" if plan.cluster else ""
    sql = (
        f"CREATE SOURCE {plan.name}{cluster} FROM POSTGRES CONNECTION {connection} "
        f"(PUBLICATION {_quote(plan.publication)}, SLOT {_quote(slot)}) "
        f"FOR TABLES ({', '.join(tables)})"
    )
    return sql, 1 + len(tables)


def create_postgres_source(
    coord: Coordinator,
    session: Session,
    plan: CreatePostgresSourcePlan,
    catalog: SessionCatalog,
    check: Any,
) -> ExecuteResponse:
    if plan.if_not_exists and coord.catalog.index.lookup(plan.name) is not None:
        notice = AdapterNotice(f"catalog item '{plan.name}' already exists, skipping", "42P07")
        return ExecuteResponse(Kind.CREATED_SOURCE, "CREATE SOURCE", notices=[notice])
    sql, count = purify(coord, plan)
    plan_statement(sql, catalog)  # the stored form plans (else nothing is stored)
    store_item(coord, session, sql, count)
    return ExecuteResponse(Kind.CREATED_SOURCE, "CREATE SOURCE")


# --- running ------------------------------------------------------------------------


@dataclass
class _Running:
    spec: PostgresIngestionSpec
    ingestion: PostgresIngestion | None


_RUNNING: weakref.WeakKeyDictionary[Coordinator, dict[GlobalId, _Running]] = (
    weakref.WeakKeyDictionary()
)


def _decoder(scalar: ScalarType) -> Any:
    if scalar is ScalarType.TEXT:
        return str
    return lambda text: parse_text_as(text, scalar)


def ingestion_spec(
    catalog: Catalog, key: bytes | None, id: GlobalId, plan: CreatePostgresSourcePlan
) -> PostgresIngestionSpec:
    """What the ingestion of source `id` reads and writes, from the durable
    catalog (a coordinator and a worker build it alike)."""
    entry = catalog.entry(id)
    tables = []
    for table, sub in zip(plan.tables, entry.ids[1:], strict=True):
        assert table.desc is not None
        columns = tuple(
            UpstreamColumn(name, column.scalar_type, _decoder(column.scalar_type))
            for name, column in zip(table.desc.names, table.desc.types, strict=True)
        )
        tables.append(UpstreamTable(table.upstream[0], table.upstream[-1], sub, columns))
    assert plan.slot is not None
    conninfo = stored_conninfo(catalog, key, _connection_plan(catalog, plan.connection))
    return PostgresIngestionSpec(id, conninfo, plan.publication, plan.slot, tuple(tables))


def _connection_plan(catalog: Catalog, id: GlobalId) -> CreateConnectionPlan:
    plan = catalog.index.plans.get(id)
    if not isinstance(plan, CreateConnectionPlan):
        raise AdapterError(f"unknown connection {id}", code="42704")
    return plan


def install(coord: Coordinator, item: CatalogItem, plan: CreatePostgresSourcePlan) -> None:
    """The source item starts its ingestion here (in a background
    coordinator, unless workers of its cluster run it as a scheduler task);
    each subsource gets its collection."""
    entry = coord.catalog.entry(item.id)
    if item.id != entry.ids[0]:
        # Every subsource starts at the source's creation time, where its
        # snapshot lands (reads at or after it wait for the snapshot).
        start = entry.created_at or coord.oracle.read_ts()
        description = CollectionDescription(item.desc, DataSource.other(), Frontier.at(start))
        coord.storage.create_collections([(item.id, description)])
        return
    spec = ingestion_spec(coord.catalog, configured_key(coord.config), item.id, plan)
    ingestion = None
    if coord.config.background and not clusters.runs_on_workers(coord, item.id):
        ingestion = PostgresIngestion(
            spec,
            coord.storage.persist.consensus,
            coord.storage.shard,
            lambda: max(now_ms(), coord.oracle.read_ts()),
            coord.storage.update_write_frontiers,
            lambda: coord.closing,
        )
        ingestion.start()
    _RUNNING.setdefault(coord, {})[item.id] = _Running(spec, ingestion)


def uninstall(coord: Coordinator, id: GlobalId) -> None:
    """A dropped source: stop its ingestion, drop its slot upstream."""
    running = _RUNNING.get(coord, {}).pop(id, None)
    if running is None:
        return
    mark_dropped(coord.storage.persist.consensus, id)  # before the slot goes
    if running.ingestion is not None:
        running.ingestion.stop()
    try:
        drop_slot(running.spec.conninfo, running.spec.slot)
    except Exception as error:  # upstream unreachable: the slot stays (and holds WAL)
        log.warning("could not drop replication slot %s: %s", running.spec.slot, error)


def raise_source_errors(coord: Coordinator, ids: Iterable[GlobalId]) -> None:
    """A read waiting for a subsource that stopped (or for a view over one)
    answers with the subsource's error instead of waiting for ever."""
    running = _RUNNING.get(coord)
    if not running:
        return
    owner = {t.id: source for source, r in running.items() for t in r.spec.tables}
    seen: set[GlobalId] = set()
    pending = list(ids)
    while pending:
        id = pending.pop()
        if id in seen:
            continue
        seen.add(id)
        source = owner.get(id)
        if source is not None:
            error = read_progress(coord.storage.persist.consensus, source)["errors"].get(str(id))
            if error is not None:
                name = coord.catalog.get(id).name
                raise AdapterError(f"subsource {name} stopped: {error}", code="55000")
            continue
        try:
            pending.extend(coord.catalog.get(id).depends_on)
        except Exception:
            continue


# mz_internal.mz_source_statuses (Materialize's columns, fewer of them).
STATUS_COLUMNS = (
    ("id", "text", False),
    ("name", "text", False),
    ("type", "text", False),
    ("status", "text", False),
    ("error", "text", True),
)


def status_rows(coord: Coordinator) -> list[tuple[object, ...]]:
    """Each PostgreSQL source and subsource: `starting` until its snapshot
    landed, `running`, `stalled` while its ingestion here keeps failing
    (upstream unreachable, slot gone), `ceased` for a stopped subsource."""
    rows: list[tuple[object, ...]] = []
    for source, running in list(_RUNNING.get(coord, {}).items()):
        progress = read_progress(coord.storage.persist.consensus, source)
        problem = running.ingestion.last_error if running.ingestion is not None else None
        status = "stalled" if problem else ("starting" if progress["lsn"] is None else "running")
        try:
            name = str(coord.catalog.get(source).name)
        except Exception:  # dropped meanwhile
            continue
        rows.append((str(source), name, "postgres", status, problem))
        for table in running.spec.tables:
            error = progress["errors"].get(str(table.id))
            try:
                sub = str(coord.catalog.get(table.id).name)
            except Exception:
                continue
            if error is not None:
                rows.append((str(table.id), sub, "subsource", "ceased", error))
            else:
                rows.append((str(table.id), sub, "subsource", status, problem))
    return rows


HANDLERS = {CreatePostgresSourcePlan: create_postgres_source}

__all__ = [
    "HANDLERS",
    "STATUS_COLUMNS",
    "create_postgres_source",
    "ingestion_spec",
    "install",
    "purify",
    "raise_source_errors",
    "status_rows",
    "uninstall",
]
