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
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from coordinator_lib.adapter.catalog import SessionCatalog
from coordinator_lib.adapter.connections import store_item
from coordinator_lib.adapter.errors import AdapterError, AdapterNotice
from coordinator_lib.adapter.responses import ExecuteResponse
from coordinator_lib.adapter.responses import ExecuteResponseKind as Kind
from coordinator_lib.adapter.session import Session
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.sql.catalog import CatalogItem
from coordinator_lib.sql.plan_iceberg import CreateIcebergConnectionPlan, CreateIcebergSinkPlan
from coordinator_lib.storage.iceberg_sink import IcebergSink, IcebergSinkSpec, open_catalog

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator
    from coordinator_lib.storage.read_hold import DependencyHold

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


def _connection(coord: Coordinator, id: GlobalId) -> CreateIcebergConnectionPlan:
    plan = coord.catalog.index.plans.get(id)
    if not isinstance(plan, CreateIcebergConnectionPlan):
        name = coord.catalog.get(id).name
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
    _connection(coord, plan.connection)
    store_item(coord, session, plan.create_sql)
    return ExecuteResponse(Kind.CREATED_SINK, "CREATE SINK")


# --- running ------------------------------------------------------------------------

# Per coordinator: each running sink and its hold on its input (one at most).
_RUNNING: weakref.WeakKeyDictionary[
    Coordinator, dict[GlobalId, tuple[IcebergSink, list[DependencyHold]]]
] = weakref.WeakKeyDictionary()


def install(coord: Coordinator, item: CatalogItem) -> None:
    """Start the sink (in a background coordinator only)."""
    plan = coord.catalog.index.plans.get(item.id)
    if not isinstance(plan, CreateIcebergSinkPlan) or not coord.config.background:
        return
    spec = IcebergSinkSpec(
        str(item.id),
        catalog_properties(_connection(coord, plan.connection)),
        plan.namespace,
        plan.table,
        plan.desc,
        plan.key,
    )
    holds: list[DependencyHold] = []

    def hold(time: int) -> None:
        if not holds:
            holds.append(coord.storage.acquire_dependency_hold(plan.from_id, item.id, time))
        else:
            holds[0].downgrade(time)

    def start() -> int:
        since, upper = coord.storage.collection_frontiers(plan.from_id)
        return max(since.time or 0, (upper.time or 1) - 1)

    sink = IcebergSink(
        spec,
        lambda: coord.storage.shard(plan.from_id),
        start,
        hold,
        lambda: coord.closing,
    )
    sink.start()
    _RUNNING.setdefault(coord, {})[item.id] = (sink, holds)


def uninstall(coord: Coordinator, id: GlobalId) -> None:
    """A dropped sink: stop it and let its input compact again."""
    running = _RUNNING.get(coord, {}).pop(id, None)
    if running is not None:
        running[0].stop()
        for hold in running[1]:
            hold.release()


def sink_error(coord: Coordinator, id: GlobalId) -> str | None:
    running = _RUNNING.get(coord, {}).get(id)
    return running[0].error if running is not None else None


HANDLERS = {
    CreateIcebergConnectionPlan: create_iceberg_connection,
    CreateIcebergSinkPlan: create_iceberg_sink,
}

__all__ = ["HANDLERS", "install", "sink_error", "uninstall"]
