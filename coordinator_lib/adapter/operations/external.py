"""What an orchestrator shows of the systems Tidemark exchanges data with:
how far a PostgreSQL subsource is behind its upstream, and where an Iceberg
sink's table is. Both only read (the progress record, the upstream's WAL
position, the Iceberg catalog); nothing here writes."""

from __future__ import annotations

from dataclasses import dataclass

from coordinator_lib.adapter.connections import connect, connection_plan, conninfo_of
from coordinator_lib.adapter.coordinator import Coordinator
from coordinator_lib.adapter.iceberg_sink import catalog_properties, iceberg_connection
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.sql.plan_iceberg import CreateIcebergSinkPlan
from coordinator_lib.sql.plan_postgres import CreatePostgresSourcePlan
from coordinator_lib.storage.iceberg_sink import committed_upper, open_catalog
from coordinator_lib.storage.postgres_source import lsn_text, parse_lsn, read_progress


@dataclass(frozen=True)
class ReplicationLag:
    """`committed_lsn`: the upstream WAL position the subsource has durably
    taken in (None before its snapshot landed); `upstream_lsn`: the
    upstream's current WAL position, None with `error` if it was not
    reachable; `lag_bytes`: how much WAL lies between them."""

    committed_lsn: str | None
    upstream_lsn: str | None
    lag_bytes: int | None
    error: str | None = None


def postgres_source_plan(coordinator: Coordinator, id: GlobalId) -> CreatePostgresSourcePlan | None:
    """The CREATE SOURCE of a PostgreSQL source or subsource `id`, else None."""
    plan = coordinator.catalog.index.plans.get(coordinator.catalog.entry(id).ids[0])
    return plan if isinstance(plan, CreatePostgresSourcePlan) else None


def replication_lag(coordinator: Coordinator, id: GlobalId) -> ReplicationLag:
    """Subsource (or source) `id`'s lag behind its upstream, in WAL bytes."""
    plan = postgres_source_plan(coordinator, id)
    if plan is None:
        raise ValueError(f"{id} is not a PostgreSQL source")
    source = coordinator.catalog.entry(id).ids[0]
    lsn = read_progress(coordinator.storage.persist.consensus, source)["lsn"]
    committed = None if lsn is None else lsn_text(lsn)
    try:
        conninfo = conninfo_of(coordinator, connection_plan(coordinator, plan.connection))
        with connect(conninfo) as conn:
            row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    except Exception as error:  # the upstream is down or refuses us: say so
        return ReplicationLag(committed, None, None, str(error).strip().splitlines()[0])
    assert row is not None
    upstream = parse_lsn(row[0])
    lag = None if lsn is None else max(0, upstream - lsn)
    return ReplicationLag(committed, lsn_text(upstream), lag)


@dataclass(frozen=True)
class SinkTable:
    """An Iceberg sink's table: `identifier` (namespace.table), its current
    snapshot's id and the upper that commit recorded (None: no commit yet)."""

    identifier: str
    snapshot_id: int | None
    upper: int | None


def iceberg_sink_table(coordinator: Coordinator, id: GlobalId) -> SinkTable:
    plan = coordinator.catalog.index.plans.get(id)
    if not isinstance(plan, CreateIcebergSinkPlan):
        raise ValueError(f"{id} is not an Iceberg sink")
    from pyiceberg.exceptions import NoSuchTableError

    identifier = f"{plan.namespace}.{plan.table}"
    catalog = open_catalog(
        catalog_properties(iceberg_connection(coordinator.catalog, plan.connection))
    )
    try:
        table = catalog.load_table((plan.namespace, plan.table))
    except NoSuchTableError:  # the sink has not created it yet
        return SinkTable(identifier, None, None)
    snapshot = table.current_snapshot()
    return SinkTable(
        identifier, None if snapshot is None else snapshot.snapshot_id, committed_upper(table)
    )


__all__ = [
    "ReplicationLag",
    "SinkTable",
    "iceberg_sink_table",
    "postgres_source_plan",
    "replication_lag",
]
