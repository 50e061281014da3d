"""The Coordinator (seed 000): owns the catalog, the timestamp oracle and the
storage and compute controllers of one process, and keeps them in step.

- The durable catalog is the source of truth. `reconcile()` makes this
  process's runtime state match it: storage collections for tables, sources
  and materialized views, dataflows for materialized views and indexes. DDL
  commits to the catalog and then reconciles; another process's DDL shows up
  at the next `catalog.refresh()`.
- Table writes go through group commit (one timestamp from the oracle, then
  `apply_write`); a timer commits nothing to advance idle tables' uppers.
- Reads hold their inputs at their sinces, choose a timestamp
  (`timestamp_selection`), move the holds up to it (`determine_and_hold`),
  wait for the uppers, and evaluate: an index's arrangement, a collection's
  snapshot, or a one-shot dataflow.
- A maintenance thread steps dataflows, runs ingestions, advances idle
  tables and runs the compaction pass (`compaction_pass`).

Statement handling (plan -> response) is in `sequence.py`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa
from pydantic import BaseModel

from coordinator_lib.adapter import clusters, iceberg_sink, postgres_source
from coordinator_lib.adapter.catalog import DEFAULT_CLUSTER, Catalog, CatalogIndex
from coordinator_lib.adapter.continual_task import ContinualTask
from coordinator_lib.adapter.errors import (
    AdapterError,
    DependencyDropped,
    InvalidTimestamp,
    QueryCanceled,
    RelationOutsideTimeDomain,
)
from coordinator_lib.adapter.finishing import iter_finished
from coordinator_lib.adapter.group_commit import Changes, GroupCommitter
from coordinator_lib.adapter.maintainer import MaintainerHeartbeat, index_states
from coordinator_lib.adapter.oracle import TimestampOracle, wall_clock_ms
from coordinator_lib.adapter.plan_cache import PlanCache
from coordinator_lib.adapter.roles import Authenticator
from coordinator_lib.adapter.session import SERIALIZABLE, Session
from coordinator_lib.adapter.statement_log import StatementLog
from coordinator_lib.adapter.stream import RowStream
from coordinator_lib.adapter.system_catalog import SYSTEM_ITEMS, system_rows
from coordinator_lib.adapter.timestamp_selection import (
    InputFrontiers,
    TimestampDetermination,
    determine_timestamp,
)
from coordinator_lib.adapter.verify import verified_rows
from coordinator_lib.adapter.webhook import install_webhook_source
from coordinator_lib.adapter.write_lock import WriteLock
from coordinator_lib.compute import ComputeController, ComputeError, DataflowDescription, budget
from coordinator_lib.compute.dataflow import LOCAL_MAX_ROWS
from coordinator_lib.compute.error_collection import compact_errors
from coordinator_lib.compute.local_scalar import EvalError
from coordinator_lib.expr.relation import Constant, Get, RelationExpr, replace_gets
from coordinator_lib.persist import PersistError
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.read_policy import LagWriteFrontier
from coordinator_lib.spark_session import LazySparkSession
from coordinator_lib.sql.catalog import CatalogItem, ItemKind
from coordinator_lib.sql.constraints import UniqueConstraint
from coordinator_lib.sql.errors import SqlError, UnknownObject
from coordinator_lib.sql.plan_postgres import CreatePostgresSourcePlan
from coordinator_lib.sql.plan_webhook import CreateWebhookSourcePlan
from coordinator_lib.sql.plans import AsOfTime, CreateSourcePlan, RowSetFinishing
from coordinator_lib.sql.temporal import plan_temporal_filters
from coordinator_lib.storage import (
    CollectionDescription,
    DataSource,
    IngestionDescription,
    ReadHold,
    StorageController,
    StorageError,
    table_description,
)
from coordinator_lib.storage.errors import IdentifierMissing, InvalidUppers
from coordinator_lib.storage.load_generator import make_generator

log = logging.getLogger(__name__)
Row = tuple[Any, ...]

# What a read meets when a relation it reads is dropped under it: its
# collection, shard, dataflow or catalog entry gone (`Coordinator.using`).
_DROP_SYMPTOMS = (StorageError, PersistError, ComputeError, UnknownObject, InvalidTimestamp)
# Names of items dropped here lately, for the errors of reads that raced the drop.
_DROPPED_NAMES_KEPT = 1000


class Config(BaseModel):
    """How to run a coordinator. Data lives under `data_dir` (SQLite consensus
    and Parquet blobs) unless `consensus_url` and `blob_root` say otherwise."""

    data_dir: str | None = None
    consensus_url: str | None = None
    blob_root: str | None = None
    spark_master: str | None = None
    # Superusers configured outside the catalog, with their passwords; any
    # user (or catalog role with a password) turns on password authentication
    # for every connection (adapter/roles.py).
    users: dict[str, str] = {}
    # The key secrets are encrypted with (adapter/secrets_key.py): base64, or a
    # file outside data_dir; else the TIDEMARK_SECRETS_KEY environment variable.
    secrets_key: str | None = None
    secrets_key_file: str | None = None
    # Materialize's default compaction window: history kept behind the upper.
    default_retain_history_ms: int = 1000
    advance_interval_ms: int = 1000
    maintenance_interval_ms: int = 50
    compaction_interval_ms: int = 10_000
    local_max_rows: int = LOCAL_MAX_ROWS
    # Webhook sources (docs/webhooks.md): the largest request body (413 above
    # it), requests handled at once (429 beyond), how long an Idempotency-Key
    # is remembered.
    webhook_max_body_bytes: int = 2 * 1024 * 1024
    webhook_max_concurrency: int = 500
    webhook_idempotency_window_ms: int = 300_000
    background: bool = True
    # The table scheduler (docs/scheduler.md): `workers` worker processes
    # maintain the default cluster's materialized views (0: this process
    # does); `scheduler` runs the owner here and gives clusters created with
    # a replication factor that many workers (`tidemark serve` sets it).
    workers: int = 0
    scheduler: bool = False
    scheduler_lease_ttl_ms: int = 10_000


class Coordinator:
    def __init__(self, config: Config, spark: Any = None) -> None:
        self.config = config
        self.storage = StorageController.open(
            config.data_dir, config.consensus_url, config.blob_root
        )
        consensus = self.storage.persist.consensus
        if spark is None:  # started by the first step or peek that needs it
            spark = LazySparkSession(config.spark_master or "local[2]")
        self.compute = ComputeController(self.storage, spark, config.local_max_rows)
        self.catalog = Catalog(consensus, SYSTEM_ITEMS)
        self.plan_cache = PlanCache()
        self.authenticator = Authenticator(self)  # who may connect (adapter/roles.py)
        self.oracle = TimestampOracle(consensus)
        self.statement_log = StatementLog()
        self.metrics = _metrics()
        self.group_commit = GroupCommitter(
            self.storage, self.oracle, self.group_committed, self.table_constraints
        )
        self._lock = threading.RLock()  # runtime state: installed items, sessions
        # refresh_catalog's single flight: refreshes started / the last one done
        self._refresh = threading.Condition()
        self._refreshes_started = 0
        self._refresh_done = 0
        self._refreshing = False
        self._refresher: int | None = None
        self._installed: dict[GlobalId, ItemKind] = {}
        self._names: dict[GlobalId, str] = {}  # installed items, then dropped ones
        self._policies: dict[GlobalId, int] = {}
        self._tasks: dict[GlobalId, ContinualTask] = {}  # continual tasks this process runs
        self._sessions: dict[int, Session] = {}
        self._subscribes: list[tuple[threading.Thread, RowStream]] = []
        self._transient = 0
        self._transient_base = random.getrandbits(40) << 20
        self._closed = threading.Event()
        self._last_compaction = 0.0
        # Read-then-write statements exclusive, blind writes shared (write_lock.py).
        self.write_lock = WriteLock()
        # The scheduler's consistent read time over worker-maintained views,
        # set by the ClusterService of `tidemark serve` (timestamp_selection).
        self.global_watermark: Callable[[], int | None] | None = None
        self.reconcile()
        self.storage.initialization_complete()
        self._thread: threading.Thread | None = None
        # A background coordinator (`tidemark serve`) maintains the views:
        # it says so in consensus, so Dagster observes instead of re-running.
        self.heartbeat: MaintainerHeartbeat | None = None
        if config.background:
            self.heartbeat = MaintainerHeartbeat(consensus)
            self.heartbeat.start()
            self._thread = threading.Thread(
                target=self._maintenance_loop, name="coordinator-maintenance", daemon=True
            )
            self._thread.start()

    # ------------------------------------------------------------ lifecycle
    def close(self) -> None:
        self._closed.set()
        with self._lock:
            for session in list(self._sessions.values()):
                self.end_session(session)
            subscribes, self._subscribes = self._subscribes, []
        for thread, stream in subscribes:
            stream.close()
            thread.join(timeout=10)
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.heartbeat is not None:
            self.heartbeat.stop()
        self.storage.close()
        self.statement_log.close()

    def track_subscribe(self, thread: threading.Thread, stream: RowStream) -> None:
        """Producers are stopped and joined before the environment closes."""
        with self._lock:
            self._subscribes = [(t, s) for t, s in self._subscribes if t.is_alive()]
            self._subscribes.append((thread, stream))

    def register_session(self, session: Session) -> None:
        with self._lock:
            self._sessions[session.id] = session
        if self.metrics is not None:
            self.metrics.session_opened()

    def end_session(self, session: Session) -> None:
        with self._lock:
            if self._sessions.pop(session.id, None) is None:
                return
        if session.transaction is not None:
            session.transaction.release()
            session.transaction = None
        for cursor in session.cursors.values():
            cursor.close()
        session.cursors.clear()
        if self.metrics is not None:
            self.metrics.session_closed()

    def sessions(self) -> list[Session]:
        with self._lock:
            return list(self._sessions.values())

    def session(self, id: int) -> Session | None:
        with self._lock:
            return self._sessions.get(id)

    # ----------------------------------------------------- catalog -> runtime
    def refresh_catalog(self) -> None:
        """Pick up DDL from other processes. Concurrent statements share one
        consensus read: a refresh that started after this call did has seen
        every DDL committed before it, so a caller waits for such a refresh
        instead of reading again (many one-row INSERTs at once)."""
        if self._refresher == threading.get_ident():  # from inside a refresh (reconcile)
            if self.catalog.refresh():
                self.reconcile()
            return
        with self._refresh:
            wanted = self._refreshes_started + 1
            while self._refresh_done < wanted and self._refreshing:
                self._refresh.wait()
            if self._refresh_done >= wanted:
                return
            self._refreshing = True
            self._refresher = threading.get_ident()
            self._refreshes_started += 1
            mine = self._refreshes_started
        done = False
        try:
            if self.catalog.refresh():
                self.reconcile()
            done = True
        finally:
            with self._refresh:
                self._refreshing = False
                self._refresher = None
                if done:
                    self._refresh_done = mine
                self._refresh.notify_all()

    def reconcile(self) -> None:
        """Install what the catalog has and this process does not; remove
        what it no longer has; apply read policies."""
        with self._lock:
            items = {item.id: item for item in self.catalog.items()}
            for id in sorted(set(self._installed) - set(items), reverse=True):
                self._uninstall(id, self._installed.pop(id))
                self._forget_name(id)
            for id, item in items.items():
                if id not in self._installed:
                    try:
                        self._install(item)
                    except (StorageError, AdapterError) as error:
                        log.error("could not install %s %s: %s", item.kind, item.name, error)
                        continue
                    self._installed[id] = item.kind
                    self._names[id] = str(item.name)
            for entry in self.catalog.entries():
                for id in entry.ids:
                    if self._installed.get(id) in (
                        ItemKind.TABLE,
                        ItemKind.SOURCE,
                        ItemKind.MATERIALIZED_VIEW,
                        ItemKind.CONTINUAL_TASK,
                    ):
                        lag = entry.retain_history_ms or self.config.default_retain_history_ms
                        if self._policies.get(id) != lag and self._has_collection(id):
                            self.storage.set_read_policy([(id, LagWriteFrontier(lag))])
                            self._policies[id] = lag

    def _forget_name(self, id: GlobalId) -> None:
        """Keep a dropped item's name (moved last), and only the newest ones."""
        self._names[id] = self._names.pop(id, str(id))
        dropped = [i for i in self._names if i not in self._installed]
        for old in dropped[: max(0, len(dropped) - _DROPPED_NAMES_KEPT)]:
            del self._names[old]

    def _has_collection(self, id: GlobalId) -> bool:
        try:
            self.storage.collection(id)
        except StorageError:
            return False
        return True

    def instance_for(self, item: CatalogItem) -> str:
        self._ensure_instance(DEFAULT_CLUSTER)
        return DEFAULT_CLUSTER

    def _ensure_instance(self, name: str) -> None:
        if name not in self.compute.instance_ids():
            self.compute.create_instance(name)
            self.compute.add_replica(name, "r1")

    def _advance_past(self, id: GlobalId, time: int) -> None:
        """Move `id`'s upper past `time` unless it already is: another
        process installing the same table, or advancing idle tables, may
        move it between our read of the upper and our append."""
        for _ in range(3):
            _, upper = self.storage.collection_frontiers(id)
            if upper.time is None or upper.time > time:
                return
            try:
                self.storage.append([(id, [], time + 1)])
                return
            except InvalidUppers:
                continue  # someone moved it: look again

    def _install(self, item: CatalogItem) -> None:
        if item.kind is ItemKind.TABLE:
            # A new table starts at a fresh write time: readable at once, and
            # never at times before it existed.
            created = self.oracle.write_ts()
            self.storage.create_collections([(item.id, table_description(item.desc, created))])
            self._advance_past(item.id, created)
            self.oracle.apply_write(created)
        elif item.kind is ItemKind.SOURCE:
            self._install_source(item)
        elif item.kind is ItemKind.SINK:
            iceberg_sink.install(self, item)
        elif item.kind is ItemKind.MATERIALIZED_VIEW:
            assert item.expr is not None
            self._install_materialized_view(item.id, item.expr, item.desc)
        elif item.kind is ItemKind.CONTINUAL_TASK:
            task = ContinualTask(self, item.id, self.catalog.index.plans[item.id])
            task.install()
            self._tasks[item.id] = task
        elif item.kind is ItemKind.INDEX:
            assert item.on is not None and item.key is not None
            on = self.catalog.get(item.on)
            expr = on.expr if on.kind is ItemKind.VIEW and on.expr is not None else None
            # A view's mz_now() comparisons become temporal filters (sql/temporal.py).
            expr = plan_temporal_filters(expr) if expr is not None else Get(on.id, on.desc)
            with self.held_as_of(expr.depends_on()) as as_of:
                self.compute.create_dataflow(
                    self.instance_for(item),
                    DataflowDescription(
                        item.id, expr, as_of, index_key=item.key, debug_name=str(item.name)
                    ),
                )

    def _install_source(self, item: CatalogItem) -> None:
        index: CatalogIndex = self.catalog.index
        entry = self.catalog.entry(item.id)
        plan = index.plans.get(entry.ids[0])
        if isinstance(plan, CreateWebhookSourcePlan):
            install_webhook_source(self, item)
            return
        if isinstance(plan, CreatePostgresSourcePlan):
            postgres_source.install(self, item, plan)
            return
        if not isinstance(plan, CreateSourcePlan):
            return
        output = next((out for out, name in plan.subsources.items() if name == item.name), None)
        if output is None:  # the parent of FOR ALL TABLES subsources holds no rows
            return
        options = tuple(sorted(plan.options.items()))
        generator = make_generator(plan.generator, **dict(options))
        ingestion = IngestionDescription(
            plan.generator,
            output,
            entry.created_at or self.oracle.read_ts(),
            plan.tick_interval_ms or 1000,
            options,
        )
        self.storage.create_collections(
            [
                (
                    item.id,
                    CollectionDescription(
                        generator.outputs()[output], DataSource.ingestion_of(ingestion)
                    ),
                )
            ]
        )

    def _install_materialized_view(
        self, id: GlobalId, expr: RelationExpr, desc: Any, as_of: int | None = None
    ) -> None:
        """`as_of`: where the caller holds the inputs (a SUBSCRIBE's view);
        else the least valid as_of, chosen and used under holds."""
        held = (
            self.held_as_of(expr.depends_on()) if as_of is None else contextlib.nullcontext(as_of)
        )
        with held as start:
            # A view whose collection exists durably (created by this or another
            # process, maybe long ago) resumes at its upper - 1, where its
            # dependency holds kept its inputs readable; a new one starts at
            # `start`. (The collection is created first: this process may not
            # have opened it yet.)
            self.storage.create_collections(
                [(id, CollectionDescription(desc, DataSource.other(), Frontier.at(start)))]
            )
            since, upper = self.storage.collection_frontiers(id)
            if since.time is not None and upper.time is not None:
                start = max(upper.time - 1, since.time)
            self._ensure_instance(DEFAULT_CLUSTER)
            # On a cluster with workers: a dataflow nothing here steps (the
            # scheduler's workers do; adapter/clusters.py).
            instance = clusters.worker_instance(self, id) or DEFAULT_CLUSTER
            self.compute.create_dataflow(instance, DataflowDescription(id, expr, start, sink_id=id))

    @contextlib.contextmanager
    def held_as_of(self, inputs: set[GlobalId]) -> Iterator[int]:
        """A new dataflow's (or continual task's) as_of: the freshest time
        every input can be read at now (the largest since, and the least
        upper minus one), chosen under holds on the inputs at their sinces,
        which last until the caller has taken its own holds. Read unheld, a
        since could pass the chosen as_of before those holds (a source's
        first tick, a compaction pass): XX000 'as_of ... is before the since
        of its input', as Materialize's coordinator avoids by choosing
        as_ofs under read holds."""
        holds = self.hold_at_since(inputs)
        try:
            since = max((hold.time or 0 for hold in holds), default=0)
            uppers = [self.storage.collection_frontiers(hold.id)[1].time for hold in holds]
            open_uppers = [upper for upper in uppers if upper is not None]
            readable = min(open_uppers) - 1 if open_uppers else self.oracle.read_ts()
            yield max(since, readable)
        finally:
            for hold in holds:
                hold.release()

    def _uninstall(self, id: GlobalId, kind: ItemKind) -> None:
        postgres_source.uninstall(self, id)  # a PostgreSQL source: its slot
        iceberg_sink.uninstall(self, id)  # an Iceberg sink: its thread and hold
        # A SUBSCRIBE's transient view over it goes too: the SUBSCRIBE then
        # ends naming the drop (adapter/subscribe.py) instead of waiting forever.
        for reader in self.compute.transient_readers(id):
            self.drop_transient_view(reader)
        self._policies.pop(id, None)
        task = self._tasks.pop(id, None)
        if task is not None:
            task.release()
        try:
            found = self.compute.find_dataflow(id)
            if found is not None:
                self.compute.drop_collections(found[0], [id])
            if kind is not ItemKind.INDEX and self._has_collection(id):
                self.storage.drop_sources_unvalidated([id])
        except (StorageError, AdapterError) as error:
            log.warning("dropping %s: %s", id, error)

    def tables(self) -> list[GlobalId]:
        with self._lock:
            return [id for id, kind in self._installed.items() if kind is ItemKind.TABLE]

    def table_constraints(
        self, id: GlobalId
    ) -> tuple[tuple[UniqueConstraint, ...], tuple[str, ...]] | None:
        """A table's UNIQUE / PRIMARY KEY constraints and column names (group
        commit enforces them); None for anything without."""
        try:
            item = self.catalog.get(id)
        except SqlError:
            return None
        if not item.unique:
            return None
        return item.unique, item.desc.names

    def group_committed(self) -> list[GlobalId]:
        """What only group commit writes, so each commit advances it: tables
        and webhook sources."""
        plans = self.catalog.index.plans
        with self._lock:
            return [
                id
                for id, kind in self._installed.items()
                if kind is ItemKind.TABLE
                or (kind is ItemKind.SOURCE and isinstance(plans.get(id), CreateWebhookSourcePlan))
            ]

    @property
    def closing(self) -> bool:
        return self._closed.is_set()

    def is_installed(self, id: GlobalId) -> bool:
        with self._lock:
            return id in self._installed

    # ------------------------------------------------------------ frontiers
    def frontiers_of(self, id: GlobalId) -> tuple[Frontier, Frontier] | None:
        """(since, upper) of a collection or index, None if it has neither
        (also if it is dropped meanwhile)."""
        with contextlib.suppress(IdentifierMissing):
            return self.storage.collection_frontiers(id)
        found = self.compute.find_dataflow(id)
        if found is None:
            return None
        try:
            frontiers = self.compute.collection_frontiers(found[0], id)
        except ComputeError:
            return None
        return frontiers.read_frontier, frontiers.write_frontier

    def input_frontiers(self, ids: set[GlobalId]) -> list[InputFrontiers]:
        out = []
        for id in sorted(ids):
            since, upper = self.storage.collection_frontiers(id)
            name = str(self.catalog.get(id).name) if id.kind == "u" else str(id)
            out.append(InputFrontiers(str(id), name, since, upper))
        return out

    # ------------------------------------------------------------ writes
    def commit_writes(
        self, changes: Changes, encoded: dict[GlobalId, pa.Table] | None = None
    ) -> int:
        """Group-commit table changes (or, with `encoded`, the batch tables
        already encoded for the tables `changes` names); returns their
        timestamp (durable)."""
        with self.using(set(changes)):
            timestamp = self.group_commit.commit(changes, encoded)
        if self.metrics is not None:
            for id, rows in changes.items():
                count = encoded[id].num_rows if encoded and id in encoded else len(rows)
                self.metrics.rows_appended(str(id), count)
        return timestamp

    # ------------------------------------------------------------ reads
    def storage_inputs(self, expr: RelationExpr) -> set[GlobalId]:
        return {id for id in expr.depends_on() if id.kind != "s"}

    def with_system_relations(self, expr: RelationExpr) -> RelationExpr:
        """`expr` with system relations replaced by their current rows."""

        def fill(get: Get) -> RelationExpr | None:
            if get.id.kind != "s":
                return None
            rows = system_rows(self, self.catalog.get(get.id))
            return Constant(tuple((row, 1) for row in rows), get.desc)

        return replace_gets(expr, fill)

    def determine_timestamp(
        self,
        session: Session,
        expr: RelationExpr,
        as_of: AsOfTime | None,
        domain: set[GlobalId] | None = None,
    ) -> TimestampDetermination:
        """`domain`: more collections the time must be readable for (at or
        after their sinces), without waiting for their uppers."""
        ids = self.storage_inputs(expr)
        with self.using(ids):
            inputs = self.input_frontiers(ids)
            others = self.input_frontiers(set(domain or ()) - ids)
        inputs += [dataclasses.replace(f, upper=Frontier.empty()) for f in others]
        isolation = session.isolation
        oracle_ts = None if isolation == SERIALIZABLE else self.oracle.read_ts()
        watermark = None
        if self.global_watermark is not None and any(
            clusters.worker_instance(self, id) is not None for id in ids
        ):
            watermark = self.global_watermark()
        return determine_timestamp(
            inputs, isolation, as_of, oracle_ts, wall_clock_ms(), global_watermark=watermark
        )

    def determine_and_hold(
        self,
        session: Session,
        expr: RelationExpr,
        as_of: AsOfTime | None,
        domain: set[GlobalId] | None = None,
    ) -> tuple[TimestampDetermination, list[ReadHold]]:
        """The read's timestamp, and holds on its inputs there. Each input is
        held at its current since before the timestamp is chosen, so no
        compaction can move a since past the chosen time between choosing
        and holding (invariant 5); the holds then move up to it. Holding
        after choosing left that window open: a read failed with 'before its
        since' when the since passed the chosen time meanwhile."""
        holds = self.hold_at_since(self.storage_inputs(expr))
        holds += self._hold_domain(set(domain or ()) - self.storage_inputs(expr))
        try:
            domain = {hold.id for hold in holds}
            determination = self.determine_timestamp(session, expr, as_of, domain)
            for hold in holds:
                assert hold.time is not None
                if determination.timestamp < hold.time:  # an input's since: never chosen
                    raise InvalidTimestamp(
                        f"Timestamp ({determination.timestamp}) is not valid for all inputs: "
                        f"{hold.id} (since [{hold.time}])"
                    )
                hold.downgrade(determination.timestamp)
        except BaseException:
            for hold in holds:
                hold.release()
            raise
        return determination, holds

    def hold_at_since(self, ids: set[GlobalId]) -> list[ReadHold]:
        """Hold each of `ids` at its current since (which then stays put)."""
        holds: list[ReadHold] = []
        try:
            for id in sorted(ids):
                holds.append(self.storage.acquire_read_hold(id))
        except BaseException as error:
            for hold in holds:
                hold.release()
            if isinstance(error, StorageError):  # a closed input: no time is readable
                raise InvalidTimestamp(f"No time is valid for all inputs: {error}") from error
            raise
        return holds

    def _hold_domain(self, ids: set[GlobalId]) -> list[ReadHold]:
        """Hold each of `ids` at its since, leaving out any that is gone
        (dropped meanwhile): a time domain's members beyond the read's own
        inputs."""
        holds: list[ReadHold] = []
        for id in sorted(ids):
            with contextlib.suppress(StorageError):
                holds.append(self.storage.acquire_read_hold(id))
        return holds

    def _qualified_names(self, ids: set[GlobalId]) -> list[str]:
        """The qualified names of `ids` (those still in the catalog), each part
        quoted as Materialize's time-domain error lists them, sorted."""
        names = []
        for id in ids:
            with contextlib.suppress(SqlError):
                parts = self.catalog.get(id).name.parts
                names.append(".".join('"' + p.replace('"', '""') + '"' for p in parts))
        return sorted(names)

    def time_domain(self, ids: set[GlobalId]) -> set[GlobalId]:
        """Materialize's time domain of a transaction's first read of `ids`:
        every stored collection (table, source, materialized view) in the
        schemas those are in. Holding it all at the first read's time lets
        every later read of the transaction in those schemas read there."""
        schemas = set()
        for id in ids:
            with contextlib.suppress(SqlError):
                name = self.catalog.get(id).name
                schemas.add((name.database, name.schema))
        stored = {id for id, _ in self.storage.collections()}
        return ids | {
            item.id
            for item in self.catalog.items()
            if (item.name.database, item.name.schema) in schemas and item.id in stored
        }

    def hold(self, ids: set[GlobalId], timestamp: int) -> list[ReadHold]:
        holds: list[ReadHold] = []
        try:
            for id in sorted(ids):
                holds.append(self.storage.acquire_read_hold(id, timestamp))
        except StorageError as error:
            for hold in holds:
                hold.release()
            raise InvalidTimestamp(
                f"Timestamp ({timestamp}) is not valid for all inputs: {error}"
            ) from error
        return holds

    @contextlib.contextmanager
    def using(self, ids: set[GlobalId]) -> Iterator[None]:
        """Run a read of (or a write to) `ids`. If one of them is dropped
        under it (by this process or another), whatever its vanished
        collection, shard, dataflow or catalog entry made fail becomes one
        clear error:
        42P01 'query could not complete because relation "..." was
        dropped' (Materialize's words), never an internal error. An input
        created just now is installed first (its DDL committed the catalog
        and may still be creating its collection)."""
        with self._lock:
            created = any(id not in self._installed for id in ids)
        if created:
            self.reconcile()
        try:
            yield
        except _DROP_SYMPTOMS as error:
            dropped = self.dropped_error(ids)
            if dropped is None:
                raise
            raise dropped from error

    def dropped_error(
        self, ids: set[GlobalId], what: str = "query could not complete"
    ) -> DependencyDropped | None:
        """The error naming the first of `ids` the catalog no longer has
        (looked up after picking up other processes' DDL), None if all
        are there."""
        with contextlib.suppress(Exception):  # best effort: the check below decides
            self.refresh_catalog()
        for id in sorted(ids):
            try:
                self.catalog.get(id)
            except UnknownObject:
                name = self._names.get(id, str(id))
                return DependencyDropped(f'{what} because relation "{name}" was dropped')
        return None

    def wait_for_uppers(
        self, ids: set[GlobalId], timestamp: int, check: Callable[[], None]
    ) -> None:
        """Block until every input's upper is past `timestamp`, stepping
        dataflows and ingestions meanwhile. `check` raises to stop waiting."""
        while True:
            lagging = [
                id for id in ids if self.storage.collection_frontiers(id)[1].less_equal(timestamp)
            ]
            if not lagging:
                return
            check()
            self.step_once()
            self._raise_failures(lagging)
            time.sleep(0.005)

    def _raise_failures(self, ids: list[GlobalId]) -> None:
        """A read waiting for a dataflow whose steps fail with an evaluation
        error its error collection does not cover (compute/spark_errors.py)
        answers with it instead of waiting forever; other failures (a race
        with compaction) are retried. Reads of other views are not affected."""
        postgres_source.raise_source_errors(self, ids)  # a stopped subsource
        for id in ids:
            found = self.compute.find_dataflow(id)
            failure = None if found is None else found[1].failure
            if isinstance(failure, EvalError):
                raise AdapterError.from_eval_error(failure)

    def evaluate(
        self, expr: RelationExpr, timestamp: int, check: Callable[[], None] = lambda: None
    ) -> tuple[Iterable[tuple[Row, int]], str]:
        """`expr` at `timestamp` (inputs held and complete), fast paths first;
        also says which path answered (the statement log's strategy). An
        index that can answer at `timestamp` is waited for (it is stepped
        meanwhile), as Materialize's peeks wait for their index. A view whose
        error collection is non-empty at `timestamp` answers with its error."""
        self.compute.raise_errors(expr.depends_on(), timestamp)
        if isinstance(expr, Get) and expr.id.kind != "s":
            index = self.compute.index_of(expr.id)
            if index is not None:
                instance_id, dataflow = index
                index_id = dataflow.description.id
                if self.compute.hold_index(instance_id, index_id, timestamp):
                    try:
                        while dataflow.write_frontier.less_equal(timestamp):
                            check()
                            self.step_once()
                            time.sleep(0.005)
                        rows = self.compute.peek(instance_id, index_id, timestamp)
                        return rows, "fast-path"
                    finally:
                        self.compute.release_index(instance_id, index_id, timestamp)
            return self.storage.snapshot_rows(expr.id, timestamp), "persist-fast-path"
        strategy = "standard" if expr.depends_on() else "constant"
        return self.compute.stream_expr(expr, timestamp), strategy

    def peek(
        self,
        session: Session,
        expr: RelationExpr,
        finishing: RowSetFinishing,
        as_of: AsOfTime | None,
        check: Callable[[], None],
    ) -> tuple[list[Row], int]:
        """Rows of `expr` at the chosen time, finished; and that time."""
        rows, timestamp = self.peek_stream(session, expr, finishing, as_of, check)
        return list(rows), timestamp

    def peek_stream(
        self,
        session: Session,
        expr: RelationExpr,
        finishing: RowSetFinishing,
        as_of: AsOfTime | None,
        check: Callable[[], None],
    ) -> tuple[Iterator[Row], int]:
        """peek's rows finished and verified as they are consumed (a result
        is sent as it is expanded, not built whole first)."""
        with self.using(self.storage_inputs(expr)):
            rows, timestamp = self._peek(session, expr, as_of, check)
        finished = iter_finished(rows, finishing)
        return verified_rows(_finished_desc(expr, finishing), finished), timestamp

    def _peek(
        self,
        session: Session,
        expr: RelationExpr,
        as_of: AsOfTime | None,
        check: Callable[[], None],
    ) -> tuple[Iterable[tuple[Row, int]], int]:
        inputs = self.storage_inputs(expr)
        transaction = session.transaction
        if transaction is not None and transaction.timestamp is not None and as_of is None:
            timestamp = transaction.timestamp
            holds: list[ReadHold] = []
            # The first read held its time domain; nothing else is readable here.
            held = {h.id for h in transaction.holds}
            if not inputs <= held:
                raise RelationOutsideTimeDomain(
                    self._qualified_names(inputs - held), self._qualified_names(held)
                )
        else:
            # Only a read of stored data fixes the transaction's time (and
            # makes it read-only); a catalog lookup (SQLAlchemy's has_table
            # before an INSERT) or a constant does not. It holds the time
            # domain there until COMMIT / ROLLBACK (`Transaction.release`).
            fixes = transaction is not None and bool(inputs) and as_of is None
            domain = self.time_domain(inputs) if fixes else None
            determination, holds = self.determine_and_hold(session, expr, as_of, domain)
            timestamp = determination.timestamp
            if transaction is not None and inputs:
                transaction.timestamp = timestamp
                transaction.holds += holds
                holds = []
        try:
            self.wait_for_uppers(inputs, timestamp, check)
            rows, strategy = self.evaluate(self.with_system_relations(expr), timestamp, check)
            if session.statement is not None:
                session.statement.execution_strategy = strategy
                session.statement.execution_timestamp = timestamp
        finally:
            if transaction is None:
                for hold in holds:
                    hold.release()
        return rows, timestamp

    def new_transient_id(self) -> GlobalId:
        """Unique across processes too: transient collections share consensus."""
        with self._lock:
            self._transient += 1
            return GlobalId.transient(self._transient_base + self._transient)

    def install_transient_view(self, id: GlobalId, expr: RelationExpr, as_of: int) -> None:
        """A materialized view for one SUBSCRIBE (dropped with it)."""
        self._install_materialized_view(id, expr, expr.desc, as_of)

    def drop_transient_view(self, id: GlobalId) -> None:
        self._uninstall(id, ItemKind.MATERIALIZED_VIEW)

    # ------------------------------------------------------------ maintenance
    def step_once(self) -> None:
        """One round of background work: ingestions, then dataflow steps.
        It is maintenance whoever runs it: a read that steps dataflows while
        it waits for them does not charge their work to its own budget
        (compute/budget.py), which would fail their steps past its
        max_query_memory and leave the read waiting for them."""
        with budget.active(budget.UNLIMITED):
            self.storage.process()
            results = self.compute.process()
            with self._lock:
                tasks = list(self._tasks.values())
            for task in tasks:
                try:
                    task.step()
                except (StorageError, AdapterError, SqlError) as error:
                    log.warning("continual task %s: %s", task.id, error)
        if self.metrics is not None:
            for result in results:
                self.metrics.step_finished("dataflow", result.seconds, result.rows_written)

    def compaction_pass(self) -> Any:
        """Apply read policies and compact shards (also run by Dagster's sensor)."""
        return compaction_pass(self.storage)

    def _maintenance_loop(self) -> None:
        interval = self.config.maintenance_interval_ms / 1000
        while not self._closed.wait(interval):
            try:
                self.refresh_catalog()
                if wall_clock_ms() - self.oracle.peek_write_ts() >= self.config.advance_interval_ms:
                    self.group_commit.advance()
                self.step_once()
                if self.heartbeat is not None:
                    indexes = [i.id for i in self.catalog.items() if i.kind is ItemKind.INDEX]
                    self.heartbeat.report_indexes(index_states(self.compute, indexes))
                now = time.monotonic()
                if now - self._last_compaction >= self.config.compaction_interval_ms / 1000:
                    self._last_compaction = now
                    self.compaction_pass()
                self.storage.flush_inline()
                self._update_frontier_metrics()
            except Exception:
                log.exception("maintenance round failed")

    def _update_frontier_metrics(self) -> None:
        if self.metrics is None:
            return
        now = wall_clock_ms()
        with self._lock:
            installed = list(self._installed)
        for id in installed:
            with contextlib.suppress(IdentifierMissing):  # dropped meanwhile
                since, upper = self.storage.collection_frontiers(id)
                self.metrics.set_frontiers(str(id), since.time, upper.time, now)


def compaction_pass(storage: StorageController) -> Any:
    """The periodic compaction pass: refresh frontiers (read policies move
    every since along with its upper), compact shards, collect garbage; then
    the error collections beside them, to the same since."""
    report = storage.maintain()
    parameters = storage.parameters
    for id, _ in storage.collections():
        with contextlib.suppress(IdentifierMissing):  # dropped meanwhile
            compact_errors(
                storage.shard(id),
                target_rows=parameters.compaction_target_rows,
                max_batches=parameters.compaction_max_batches,
            )
    return report


def _finished_desc(expr: RelationExpr, finishing: RowSetFinishing) -> Any:
    from coordinator_lib.repr.relation import RelationDesc

    d = expr.desc
    cols = finishing.project or tuple(range(d.arity))
    names = tuple(d.names[i] for i in cols)
    if len(set(names)) != len(names):  # the check needs distinct names
        names = tuple(f"{name}_{n}" for n, name in enumerate(names))
    return RelationDesc(names, tuple(d.types[i] for i in cols))


def _metrics() -> Any:
    try:
        from coordinator_lib.adapter.metrics import Metrics
    except ImportError:  # pragma: no cover - metrics module always ships
        return None
    return Metrics()


__all__ = ["Config", "Coordinator", "QueryCanceled", "compaction_pass"]
