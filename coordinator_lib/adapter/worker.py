"""`tidemark worker`: a capture of the table scheduler (docs/scheduler.md).

It opens the environment (consensus, blobs, a Spark session created only if
a step needs one), reads definitions from the durable catalog, and runs
a `CaptureRunner`: a liveness lease, an Agent taking the owner's orders
through consensus mailboxes, a `DataflowExecutor` maintaining the
materialized views it is given and a `StorageExecutor` running the
PostgreSQL sources' ingestions and the Iceberg sinks it is given. It
writes only through compare-and-sets (a view's upper, a source's progress
record with its data, a sink's Iceberg commit), so any number of workers
(and coordinators) may run at once; the scheduler just keeps each task on
one of them.

A worker started by a supervisor (`--parent-pid`) exits when that parent
dies, so a dead `tidemark serve` leaves no workers behind for its successor
to collide with.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from dataclasses import dataclass

from coordinator_lib.adapter.catalog import Catalog
from coordinator_lib.adapter.iceberg_sink import make_sink
from coordinator_lib.adapter.oracle import TimestampOracle
from coordinator_lib.adapter.postgres_source import ingestion_spec
from coordinator_lib.adapter.secrets_key import env_key
from coordinator_lib.adapter.system_catalog import SYSTEM_ITEMS
from coordinator_lib.compute import ComputeController, DataflowDescription
from coordinator_lib.compute.dataflow import LOCAL_MAX_ROWS
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.repr.timestamp import now_ms
from coordinator_lib.scheduler.capture import DEFAULT_LEASE_TTL_MS, CaptureRunner
from coordinator_lib.scheduler.dataflow_executor import DataflowExecutor, TaskUnavailable
from coordinator_lib.scheduler.storage_executor import RoutedExecutor, StorageExecutor, StorageTask
from coordinator_lib.spark_session import LazySparkSession
from coordinator_lib.sql.catalog import ItemKind
from coordinator_lib.sql.plan_iceberg import CreateIcebergSinkPlan
from coordinator_lib.sql.plan_postgres import CreatePostgresSourcePlan
from coordinator_lib.storage import CollectionDescription, DataSource, StorageController
from coordinator_lib.storage.controller import COLLECTION_PREFIX
from coordinator_lib.storage.postgres_source import PostgresIngestion

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerConfig:
    capture_id: str
    cluster: str = "quickstart"
    data_dir: str | None = None
    consensus_url: str | None = None
    blob_root: str | None = None
    spark_master: str | None = None
    lease_ttl_ms: int = DEFAULT_LEASE_TTL_MS
    local_max_rows: int = LOCAL_MAX_ROWS
    parent_pid: int | None = None


class ViewResolver:
    """`describe(span)` for the executor: the view's definition from the
    durable catalog, its collections opened in this process's storage."""

    def __init__(self, storage: StorageController, catalog: Catalog) -> None:
        self.storage = storage
        self.catalog = catalog
        self.consensus = storage.persist.consensus

    def _item(self, id: GlobalId):
        try:
            return self.catalog.get(id)
        except Exception:
            self.catalog.refresh()  # created since we last looked?
            try:
                return self.catalog.get(id)
            except Exception:
                raise TaskUnavailable(f"{id} is not in the catalog") from None

    def _open(self, id: GlobalId) -> None:
        """Open a collection that exists durably, as the record describes it."""
        head = self.consensus.head(f"{COLLECTION_PREFIX}{id}")
        if head is None:
            raise TaskUnavailable(f"collection {id} does not exist (yet)")
        desc = RelationDesc.from_json(json.loads(head.data)["desc"])
        self.storage.create_collections([(id, CollectionDescription(desc, DataSource.other()))])

    def __call__(self, span: str) -> DataflowDescription:
        id = GlobalId.parse(span)
        item = self._item(id)
        if item.kind is not ItemKind.MATERIALIZED_VIEW or item.expr is None:
            raise TaskUnavailable(f"{span} is a {item.kind.sql_name}, not a materialized view")
        for input_id in sorted(item.expr.depends_on()):
            if input_id.kind == "s":
                raise TaskUnavailable(f"{span} reads system relation {input_id}")
            self._open(input_id)
        self._open(id)
        since, upper = self.storage.collection_frontiers(id)
        if upper.time is None or since.time is None:
            raise TaskUnavailable(f"{span} is closed")
        # Resume where the view is durably: its upper - 1 (or its since if it
        # was never written, which makes the first step its hydration).
        as_of = max(upper.time - 1, since.time)
        return DataflowDescription(id, item.expr, as_of, sink_id=id, debug_name=str(item.name))


class StorageTaskResolver:
    """`describe(span)` for the storage executor: a PostgreSQL source's
    ingestion or an Iceberg sink, built from the durable catalog (the
    connection's password unsealed with the secrets key the supervisor
    passes in the environment), its collections opened here."""

    def __init__(self, views: ViewResolver, oracle: TimestampOracle) -> None:
        self.views = views
        self.storage = views.storage
        self.catalog = views.catalog
        self.oracle = oracle

    def is_storage(self, span: str) -> bool:
        plan = self.catalog.index.plans.get(self.views._item(GlobalId.parse(span)).id)
        return isinstance(plan, CreatePostgresSourcePlan | CreateIcebergSinkPlan)

    def __call__(self, span: str) -> StorageTask:
        id = self.views._item(GlobalId.parse(span)).id
        plan = self.catalog.index.plans.get(id)
        if isinstance(plan, CreateIcebergSinkPlan):
            self.views._open(plan.from_id)
            sink, _ = make_sink(self.storage, self.catalog, id)
            return sink
        assert isinstance(plan, CreatePostgresSourcePlan)
        spec = ingestion_spec(self.catalog, env_key(), id, plan)
        for table in spec.tables:
            self.views._open(table.id)
        return PostgresIngestion(
            spec,
            self.views.consensus,
            self.storage.shard,
            lambda: max(now_ms(), self.oracle.read_ts()),
            self.storage.update_write_frontiers,
        )


def run_worker(config: WorkerConfig) -> int:
    storage = StorageController.open(config.data_dir, config.consensus_url, config.blob_root)
    try:
        catalog = Catalog(storage.persist.consensus, SYSTEM_ITEMS)
        spark = LazySparkSession(config.spark_master or "local[2]")
        compute = ComputeController(storage, spark, config.local_max_rows)  # type: ignore[arg-type]
        resolver = ViewResolver(storage, catalog)
        tasks = StorageTaskResolver(resolver, TimestampOracle(storage.persist.consensus))
        runner = CaptureRunner(
            storage.persist.consensus,
            config.capture_id,
            config.cluster,
            lambda fence: RoutedExecutor(
                DataflowExecutor(compute, resolver, fence=fence),
                StorageExecutor(tasks),
                tasks.is_storage,
            ),
            lease_ttl_ms=config.lease_ttl_ms,
            address=f"pid:{os.getpid()}",
        )
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, lambda *_: runner.stop())
        if config.parent_pid is not None:
            threading.Thread(
                target=_watch_parent, args=(config.parent_pid, runner), daemon=True
            ).start()
        print(f"tidemark worker {config.capture_id} (cluster {config.cluster}) running", flush=True)
        runner.run()
        log.info("worker %s stopped", config.capture_id)
        return 0
    finally:
        storage.close()


def _watch_parent(parent_pid: int, runner: CaptureRunner) -> None:
    while not runner.stop_event.wait(0.5):
        if os.getppid() != parent_pid:
            log.warning("parent %d is gone: stopping", parent_pid)
            runner.stop()
            return
