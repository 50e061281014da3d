"""Clusters with workers: which materialized views the table scheduler runs
on `tidemark worker` processes instead of this coordinator, and the CREATE
CLUSTER / DROP CLUSTER statements.

A cluster's replication factor is its number of workers (captures); the
scheduler places each of its materialized views on one of them
(docs/scheduler.md). Which clusters have workers, as this process sees it:

- the default cluster (`quickstart`) when the process runs with
  `Config.workers > 0` (`tidemark serve --workers N`);
- any other cluster of the durable catalog with a replication factor > 0,
  when the process runs the scheduler (`Config.scheduler`, set by
  `tidemark serve`). A process without it (a Dagster run, a test's bare
  coordinator) maintains every view itself, which is always correct: the
  compare-and-append on a view's upper decides who lands each step.

A view on a cluster with workers still gets a dataflow in this process, on a
compute instance named `workers:<cluster>` that has no replica: nothing here
steps it, but it is installed like any other (its collection, its durable
dependency holds on the inputs, which the workers' steps move along, and
EXPLAIN or frontiers find it). Indexes, SUBSCRIBE's transient views and
views on clusters without workers run here as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator_lib.adapter.catalog import DEFAULT_CLUSTER, SessionCatalog
from coordinator_lib.adapter.catalog_ops import (
    CatalogOp,
    CreateCluster,
    DropCluster,
    DropItems,
    catalog_transact,
)
from coordinator_lib.adapter.errors import AdapterError, AdapterNotice
from coordinator_lib.adapter.responses import ExecuteResponse
from coordinator_lib.adapter.responses import ExecuteResponseKind as Kind
from coordinator_lib.adapter.session import Session
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.sql.catalog import ItemKind
from coordinator_lib.sql.plan_cluster import CreateClusterPlan, DropClusterPlan
from coordinator_lib.sql.plan_iceberg import CreateIcebergSinkPlan
from coordinator_lib.sql.plan_postgres import CreatePostgresSourcePlan

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator

WORKER_INSTANCE_PREFIX = "workers:"


def worker_instance_name(cluster: str) -> str:
    return f"{WORKER_INSTANCE_PREFIX}{cluster}"


def worker_clusters(coord: Coordinator) -> dict[str, int]:
    """Cluster name -> number of workers, for the clusters with workers."""
    config = coord.config
    out: dict[str, int] = {}
    if config.workers > 0:
        out[DEFAULT_CLUSTER] = config.workers
    if config.scheduler or config.workers > 0:
        for name, spec in coord.catalog.clusters().items():
            factor = int(spec.get("replication_factor", 0))
            if name != DEFAULT_CLUSTER and factor > 0:
                out[name] = factor
    return out


def item_cluster(coord: Coordinator, id: GlobalId) -> str | None:
    """The cluster a catalog item runs on (its IN CLUSTER, else the default;
    a subsource's is its source's: one ingestion writes them all); None for
    what is not a catalog item."""
    try:
        coord.catalog.get(id)
    except Exception:
        return None
    try:
        first = coord.catalog.entry(id).ids[0]
    except Exception:  # a system item: no entry of its own
        first = id
    plan = coord.catalog.index.plans.get(first)
    cluster = getattr(plan, "cluster", None)
    return cluster or DEFAULT_CLUSTER


def view_cluster(coord: Coordinator, id: GlobalId) -> str | None:
    """The cluster of a catalog materialized view, None for anything else."""
    try:
        item = coord.catalog.get(id)
    except Exception:
        return None
    if item.kind is not ItemKind.MATERIALIZED_VIEW:
        return None
    return item_cluster(coord, id)


def worker_instance(coord: Coordinator, id: GlobalId) -> str | None:
    """The replica-less compute instance for view `id` if workers maintain
    it (created if missing), else None: this process steps it."""
    cluster = view_cluster(coord, id)
    if cluster is None or cluster not in worker_clusters(coord):
        return None
    name = worker_instance_name(cluster)
    if name not in coord.compute.instance_ids():
        coord.compute.create_instance(name)  # no replica: nothing here steps it
    return name


def is_storage_task(coord: Coordinator, id: GlobalId) -> bool:
    """Whether item `id` is a task of the scheduler other than a view: a
    PostgreSQL source's ingestion (the source item, not its subsources) or
    an Iceberg sink."""
    plan = coord.catalog.index.plans.get(id)
    if isinstance(plan, CreateIcebergSinkPlan):
        return True
    return isinstance(plan, CreatePostgresSourcePlan) and coord.catalog.entry(id).ids[0] == id


def runs_on_workers(coord: Coordinator, id: GlobalId) -> bool:
    """Whether workers run item `id` (its cluster has workers), not this process."""
    return item_cluster(coord, id) in worker_clusters(coord)


def cluster_tasks(coord: Coordinator) -> dict[str, list[str]]:
    """For the scheduler owner: cluster -> ids of its tasks, for the clusters
    with workers: the materialized views this process has installed, the
    PostgreSQL sources' ingestions and the sinks."""
    clusters = worker_clusters(coord)
    tasks: dict[str, list[str]] = {name: [] for name in clusters}
    for item in coord.catalog.items():
        if is_storage_task(coord, item.id):
            cluster = item_cluster(coord, item.id)
            if cluster in tasks:
                tasks[cluster].append(str(item.id))
            continue
        if item.kind is not ItemKind.MATERIALIZED_VIEW or not coord.is_installed(item.id):
            continue
        cluster = item_cluster(coord, item.id)
        if cluster in tasks:
            tasks[cluster].append(str(item.id))
    return tasks


def sync_view_instances(coord: Coordinator) -> None:
    """Move views whose cluster gained or lost workers since they were
    installed between this process's replica and the worker instance (a
    view may name a cluster before it is created). The new dataflow holds
    the inputs before the old one lets go."""
    from coordinator_lib.compute import DataflowDescription

    for instance_id in list(coord.compute.instance_ids()):
        for id, dataflow in list(_dataflows(coord, instance_id).items()):
            description = dataflow.description
            if description.sink_id is None or view_cluster(coord, id) is None:
                continue
            wanted = worker_instance(coord, id) or DEFAULT_CLUSTER
            if wanted == instance_id:
                continue
            since, upper = coord.storage.collection_frontiers(id)
            start = upper.time - 1 if upper.time else (since.time or 0)
            as_of = max(start, since.time or 0)
            coord.compute.create_dataflow(
                wanted, DataflowDescription(id, description.expr, as_of, sink_id=id)
            )
            coord.compute.forget_dataflows(instance_id, [id])  # the view stays


def _dataflows(coord: Coordinator, instance_id: str) -> dict[GlobalId, Any]:
    instance = coord.compute._instances.get(instance_id)
    return dict(instance.dataflows) if instance is not None else {}


# -- statements ---------------------------------------------------------------


def create_cluster(
    coord: Coordinator,
    session: Session,
    plan: CreateClusterPlan,
    catalog: SessionCatalog,
    check: Any,
) -> ExecuteResponse:
    if plan.name in coord.catalog.clusters():
        if plan.if_not_exists:
            notice = AdapterNotice(f"cluster '{plan.name}' already exists, skipping", "42710")
            return ExecuteResponse(Kind.CREATED_CLUSTER, "CREATE CLUSTER", notices=[notice])
        raise AdapterError(f"cluster '{plan.name}' already exists", code="42710")
    op = CreateCluster(plan.name, plan.replication_factor, plan.size)
    catalog_transact(coord, session, [op])
    return ExecuteResponse(Kind.CREATED_CLUSTER, "CREATE CLUSTER")


def drop_cluster(
    coord: Coordinator,
    session: Session,
    plan: DropClusterPlan,
    catalog: SessionCatalog,
    check: Any,
) -> ExecuteResponse:
    notices = []
    names = []
    existing = coord.catalog.clusters()
    for name in plan.names:
        if name not in existing:
            if plan.if_exists:
                notices.append(AdapterNotice(f'cluster "{name}" does not exist, skipping'))
                continue
            raise AdapterError(f"unknown cluster '{name}'", code="42704")
        if name == DEFAULT_CLUSTER:
            raise AdapterError(f"cannot drop the default cluster '{DEFAULT_CLUSTER}'", code="42501")
        names.append(name)
    if names:
        on_them = [
            item.id
            for item in coord.catalog.items()
            if item.kind in (ItemKind.MATERIALIZED_VIEW, ItemKind.INDEX, ItemKind.SOURCE)
            and item_cluster(coord, item.id) in names
        ]
        if on_them and not plan.cascade:
            first = coord.catalog.get(on_them[0])
            raise AdapterError(
                f"cannot drop cluster '{names[0]}': {first.kind.sql_name} '{first.name}' "
                "runs on it",
                code="2BP01",
                hint="Use DROP ... CASCADE to drop the cluster and what runs on it.",
            )
        # What runs on the clusters (and what depends on it) and the
        # clusters themselves go in one compare-and-set: all or nothing.
        ops: list[CatalogOp] = []
        if on_them:
            ops.append(DropItems(frozenset(coord.catalog.index.doomed(tuple(on_them), True))))
        ops += [DropCluster(name) for name in names]
        catalog_transact(coord, session, ops)
    return ExecuteResponse(Kind.DROPPED, "DROP CLUSTER", notices=notices)


HANDLERS = {CreateClusterPlan: create_cluster, DropClusterPlan: drop_cluster}

__all__ = [
    "HANDLERS",
    "WORKER_INSTANCE_PREFIX",
    "cluster_tasks",
    "create_cluster",
    "drop_cluster",
    "is_storage_task",
    "runs_on_workers",
    "sync_view_instances",
    "view_cluster",
    "worker_clusters",
    "worker_instance",
]
