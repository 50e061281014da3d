"""Iceberg catalog connections and Iceberg sinks in the adapter.

CREATE CONNECTION ... TO ICEBERG CATALOG opens the catalog (pyiceberg's SQL
catalog) and lists its namespaces, so a bad URI or warehouse is refused when
created (08001). CREATE SINK checks the connection is an Iceberg catalog and
stores the statement; a background coordinator (`tidemark serve`) runs each
sink in a thread (`storage/iceberg_sink.py`), holding the sink's input
readable at the sink's progress with a dependency hold named after the sink.
DROP SINK stops the thread and releases the hold; the Iceberg table stays.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from coordinator_lib.adapter import clusters
from coordinator_lib.adapter.catalog import Catalog, SessionCatalog
from coordinator_lib.adapter.connections import store_item
from coordinator_lib.adapter.errors import AdapterError, AdapterNotice
from coordinator_lib.adapter.responses import ExecuteResponse
from coordinator_lib.adapter.responses import ExecuteResponseKind as Kind
from coordinator_lib.adapter.session import Session
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.sql.catalog import CatalogItem
from coordinator_lib.sql.plan_iceberg import CreateIcebergConnectionPlan, CreateIcebergSinkPlan
from coordinator_lib.storage.iceberg_sink import IcebergSink, IcebergSinkSpec, open_catalog
from coordinator_lib.storage.read_hold import DependencyHold

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator
    from coordinator_lib.storage import StorageController

log = logging.getLogger(__name__)


def catalog_properties(plan: CreateIcebergConnectionPlan) -> dict[str, str]:
    return {"uri": plan.uri, "warehouse": plan.warehouse}


def check_catalog(plan: CreateIcebergConnectionPlan) -> None:
    """The catalog opens and lists its namespaces; a local warehouse exists."""
    warehouse = urlsplit(plan.warehouse)
    if warehouse.scheme in ("", "file") and not Path(warehouse.path).is_dir():
        raise AdapterError(f"Iceberg warehouse {plan.warehouse} is not a directory", code="58P01")
    try:
        open_catalog(catalog_properties(plan)).list_namespaces()
    except Exception as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise AdapterError(
            f"cannot open the Iceberg catalog at {plan.uri}: {first}", code="08001"
        ) from None


def create_iceberg_connection(
    coord: Coordinator,
    session: Session,
    plan: CreateIcebergConnectionPlan,
    catalog: SessionCatalog,
    check: Any,
) -> ExecuteResponse:
    if plan.if_not_exists and coord.catalog.index.lookup(plan.name) is not None:
        notice = AdapterNotice(f"catalog item '{plan.name}' already exists, skipping", "42P07")
        return ExecuteResponse(Kind.CREATED_CONNECTION, "CREATE CONNECTION", notices=[notice])
    check_catalog(plan)
    store_item(coord, session, plan.create_sql)
    return ExecuteResponse(Kind.CREATED_CONNECTION, "CREATE CONNECTION")


def iceberg_connection(catalog: Catalog, id: GlobalId) -> CreateIcebergConnectionPlan:
    plan = catalog.index.plans.get(id)
    if not isinstance(plan, CreateIcebergConnectionPlan):
        name = catalog.get(id).name
        raise AdapterError(f"connection {name} is not an Iceberg catalog connection", code="42809")
    return plan


def create_iceberg_sink(
    coord: Coordinator,
    session: Session,
    plan: CreateIcebergSinkPlan,
    catalog: SessionCatalog,
    check: Any,
) -> ExecuteResponse:
    if plan.if_not_exists and coord.catalog.index.lookup(plan.name) is not None:
        notice = AdapterNotice(f"catalog item '{plan.name}' already exists, skipping", "42P07")
        return ExecuteResponse(Kind.CREATED_SINK, "CREATE SINK", notices=[notice])
    iceberg_connection(coord.catalog, plan.connection)
    store_item(coord, session, plan.create_sql)
    return ExecuteResponse(Kind.CREATED_SINK, "CREATE SINK")


# --- running ------------------------------------------------------------------------

# Per coordinator: each sink's thread (None where workers run it), its input
# and its hold on the input (one at most).
_RUNNING: weakref.WeakKeyDictionary[
    Coordinator, dict[GlobalId, tuple[IcebergSink | None, GlobalId, list[DependencyHold]]]
] = weakref.WeakKeyDictionary()


def make_sink(
    storage: StorageController,
    catalog: Catalog,
    id: GlobalId,
    closing: Callable[[], bool] = lambda: False,
) -> tuple[IcebergSink, list[DependencyHold]]:
    """Sink `id` as its durable catalog entry describes it (not started),
    holding its input with a dependency hold named after it (a coordinator
    and a worker build it alike)."""
    plan = catalog.index.plans.get(id)
    assert isinstance(plan, CreateIcebergSinkPlan)
    spec = IcebergSinkSpec(
        str(id),
        catalog_properties(iceberg_connection(catalog, plan.connection)),
        plan.namespace,
        plan.table,
        plan.desc,
        plan.key,
    )
    holds: list[DependencyHold] = []

    def hold(time: int) -> None:
        if not holds:
            holds.append(storage.acquire_dependency_hold(plan.from_id, id, time))
        else:
            holds[0].downgrade(time)

    def start() -> int:
        """The input's latest readable time, held durably before it is
        returned: a process-local hold pins it first, so no compaction can
        pass it between reading the frontiers and the durable hold."""
        pinned, _ = storage.acquire_latest_read_hold(plan.from_id)
        try:
            assert pinned.time is not None
            hold(pinned.time)
            return pinned.time
        finally:
            pinned.release()

    sink = IcebergSink(spec, lambda: storage.shard(plan.from_id), start, hold, closing)
    return sink, holds


def install(coord: Coordinator, item: CatalogItem) -> None:
    """Start the sink (in a background coordinator, unless workers of its
    cluster run it as a scheduler task)."""
    plan = coord.catalog.index.plans.get(item.id)
    if not isinstance(plan, CreateIcebergSinkPlan) or not coord.config.background:
        return
    if clusters.runs_on_workers(coord, item.id):
        _RUNNING.setdefault(coord, {})[item.id] = (None, plan.from_id, [])
        return
    sink, holds = make_sink(coord.storage, coord.catalog, item.id, lambda: coord.closing)
    sink.start()
    _RUNNING.setdefault(coord, {})[item.id] = (sink, plan.from_id, holds)


def uninstall(coord: Coordinator, id: GlobalId) -> None:
    """A dropped sink: stop it and let its input compact again (the hold is
    durable: released here also when a worker ran the sink)."""
    running = _RUNNING.get(coord, {}).pop(id, None)
    if running is not None:
        sink, from_id, holds = running
        if sink is not None:
            sink.stop()
        for hold in holds or [DependencyHold(coord.storage, from_id, id)]:
            hold.release()


def sink_error(coord: Coordinator, id: GlobalId) -> str | None:
    running = _RUNNING.get(coord, {}).get(id)
    sink = running[0] if running is not None else None
    return sink.error if sink is not None else None


HANDLERS = {
    CreateIcebergConnectionPlan: create_iceberg_connection,
    CreateIcebergSinkPlan: create_iceberg_sink,
}

__all__ = [
    "HANDLERS",
    "catalog_properties",
    "iceberg_connection",
    "install",
    "make_sink",
    "sink_error",
    "uninstall",
]
