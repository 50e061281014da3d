"""The storage controller (seed 002): a partial map from GlobalId to durable
collection, with the read holds, read policies and writers that govern each
collection's since and upper.

Every collection is a persist shard. The controller keeps two kinds of read
capability on it: the *implied capability* of the collection's read policy
(held by the shard's critical reader, shared by every controller process of
the environment, since any of them computes it the same way from the durable
policy and upper), and this process's *read holds* (held by a leased reader,
so they bind other processes and lapse if this one dies). The shard's since
is the least of them all.

Deviations from seed 002, and why:
- Methods are synchronous: `append` and `snapshot` return when the work is
  durable/read instead of returning a oneshot or a future.
- `append` is atomic across collections by one compare-and-set of all their
  shards' states (consensus `compare_and_set_all`), where Materialize uses
  its txn-wal; everything is validated and encoded before anything is
  written.
- `update_read_capabilities` takes changes to this process's holds; the
  implied capability changes through `update_write_frontiers` and
  `set_read_policy`, where the seed folds both into one change batch.
- `collection_mut` is not separate: Python returns the object. Exports are
  not here: sinks are SQL objects run by the adapter (Iceberg sinks).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa
from pydantic import BaseModel, Field

from coordinator_lib.persist import errors as persist_errors
from coordinator_lib.persist.client import PersistClient
from coordinator_lib.persist.consensus import VersionedData
from coordinator_lib.persist.machine import RecordChange
from coordinator_lib.persist.shard import (
    Append,
    LeasedReader,
    Shard,
    SnapshotRows,
    compare_and_append_all,
)
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.read_policy import ReadPolicy
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.repr.timestamp import Timestamp, now_ms
from coordinator_lib.repr.update import Row, Update
from coordinator_lib.storage.collection import (
    DEFAULT_READ_POLICY,
    CollectionDescription,
    CollectionState,
    DataSource,
    DataSourceKind,
)
from coordinator_lib.storage.errors import (
    IdentifierExists,
    IdentifierMissing,
    InvalidUpdate,
    InvalidUppers,
    NotWritable,
    ReadBeforeSince,
    ReadBeyondUpper,
    StorageError,
    UpdateBeyondUpper,
)
from coordinator_lib.storage.ingestion import generator_for, ingestion_step
from coordinator_lib.storage.load_generator import LoadGenerator
from coordinator_lib.storage.read_hold import DependencyHold, ReadHold

log = logging.getLogger(__name__)

CRITICAL_READER_ID = "storage-controller"
COLLECTION_PREFIX = "storage/collection/"
FINALIZE_PREFIX = "storage/finalize/"
WRITABLE_KINDS = (DataSourceKind.TABLE, DataSourceKind.WEBHOOK, DataSourceKind.INTROSPECTION)


class StorageParameters(BaseModel):
    """Tunables (seed: `update_configuration(StorageParameters)`)."""

    compaction_target_rows: int = Field(1_000_000, gt=0)
    compaction_max_batches: int = Field(8, gt=0)
    reader_lease_ms: int = Field(60_000, gt=0)
    writer_lease_ms: int = Field(60_000, gt=0)


class AppendCommand(NamedTuple):
    """Append `updates` to `id` and advance its upper to `upper`. Without
    `expected_upper`, the controller's known write frontier is expected.
    `updates` may be an Arrow table in the batch schema (`encode`'s)."""

    id: GlobalId
    updates: Sequence[Update] | pa.Table
    upper: Timestamp | Frontier
    expected_upper: Timestamp | Frontier | None = None


@dataclass(frozen=True)
class CollectionStatistics:
    """Stored updates (not consolidated), bytes and batches of a collection."""

    rows: int
    bytes: int
    batches: int


@dataclass(frozen=True)
class MaintenanceReport:
    compacted_batches: int
    collected_blobs: int
    finalized_shards: int


def _frontier(value: Timestamp | Frontier | None) -> Frontier | None:
    if value is None or isinstance(value, Frontier):
        return value
    return Frontier.at(value)


class StorageController:
    def __init__(self, persist: PersistClient, parameters: StorageParameters | None = None) -> None:
        self.persist = persist
        self.parameters = parameters or StorageParameters()
        self._lock = threading.RLock()
        self._collections: dict[GlobalId, CollectionState] = {}
        self._shards: dict[GlobalId, Shard] = {}
        self._readers: dict[GlobalId, LeasedReader] = {}
        self._generators: dict[GlobalId, LoadGenerator] = {}
        self._instances: dict[str, str | None] = {}
        self._initialized = False
        self._closed = threading.Event()
        self._heartbeat = threading.Thread(
            target=self._heartbeat_loop, name="storage-heartbeat", daemon=True
        )
        self._heartbeat.start()

    @staticmethod
    def open(
        data_dir: str | None = None,
        consensus_url: str | None = None,
        blob_root: str | None = None,
        parameters: StorageParameters | None = None,
    ) -> StorageController:
        return StorageController(PersistClient.open(data_dir, consensus_url, blob_root), parameters)

    def close(self) -> None:
        """Release this process's holds and stop heart-beating."""
        self._closed.set()
        with self._lock:
            for reader in self._readers.values():
                try:
                    reader.expire()
                except persist_errors.PersistError:
                    log.warning("could not release reader %s", reader.reader_id)
            self._readers.clear()
        self.persist.close()

    # ------------------------------------------------------------ lifecycle
    def initialization_complete(self) -> None:
        self._initialized = True

    def update_configuration(self, parameters: StorageParameters) -> None:
        with self._lock:
            self.parameters = parameters
            for shard in self._shards.values():
                shard.writer_lease_ms = parameters.writer_lease_ms

    # ------------------------------------------------------------ instances
    def create_instance(self, id: str) -> None:
        """A storage instance runs ingestions; it starts with no replica."""
        with self._lock:
            if id in self._instances:
                raise StorageError(f"storage instance {id} already exists")
            self._instances[id] = None

    def drop_instance(self, id: str) -> None:
        with self._lock:
            if id not in self._instances:
                raise StorageError(f"storage instance {id} does not exist")
            del self._instances[id]

    def connect_replica(self, id: str, location: str) -> None:
        """Attach a replica; `location` "local" runs the instance's ingestions
        in this process's `process()`."""
        with self._lock:
            if id not in self._instances:
                raise StorageError(f"storage instance {id} does not exist")
            self._instances[id] = location

    # ---------------------------------------------------------- collections
    def _state(self, id: GlobalId) -> CollectionState:
        try:
            return self._collections[id]
        except KeyError:
            raise IdentifierMissing(id) from None

    def collection(self, id: GlobalId) -> CollectionState:
        # A dict read, not under the lock: group commit's leader looks up
        # each written table here, and must not wait behind the maintenance
        # pass or a heartbeat that holds the lock through consensus writes.
        return self._state(id)

    def collections(self) -> Iterator[tuple[GlobalId, CollectionState]]:
        with self._lock:
            return iter(list(self._collections.items()))

    def shard(self, id: GlobalId) -> Shard:
        """The persist shard behind a collection (for compute, which reads and
        writes shards directly)."""
        with self._lock:
            self._state(id)
            return self._shards[id]

    def migrate_collections(
        self, collections: Sequence[tuple[GlobalId, CollectionDescription]]
    ) -> None:
        """Check durable records against the descriptions this version expects.
        There is one storage format so far, so migration only validates."""
        for id, description in collections:
            record = self._read_record(id)
            if record is not None and RelationDesc.from_json(record["desc"]) != description.desc:
                raise StorageError(f"collection {id} is stored with another schema")

    def create_collections(
        self, collections: Sequence[tuple[GlobalId, CollectionDescription]]
    ) -> None:
        """Install collections, reopening the shard of any that exists durably
        (restart). Creating an id twice with the same description is a no-op."""
        with self._lock:
            for id, description in collections:
                existing = self._collections.get(id)
                if existing is not None:
                    if existing.description != description:
                        raise IdentifierExists(id)
                    continue
                self._install(id, description)

    def _install(self, id: GlobalId, description: CollectionDescription) -> None:
        record = self._read_record(id)
        if record is None:
            record = {
                "shard_id": f"s{uuid.uuid4().hex}",
                "desc": description.desc.to_json(),
                "data_source": description.data_source.to_json(),
                "read_policy": DEFAULT_READ_POLICY.to_json(),
            }
            if not self.persist.consensus.compare_and_set(
                self._record_key(id), None, VersionedData(1, json.dumps(record).encode())
            ):
                record = self._read_record(id)  # created concurrently
                assert record is not None
        initial = description.since.time if description.since is not None else 0
        try:
            shard = self.persist.open_shard(record["shard_id"], description.desc, initial or 0)
        except persist_errors.SchemaMismatch as error:
            raise StorageError(f"collection {id}: {error}") from error
        shard.writer_lease_ms = self.parameters.writer_lease_ms
        policy = ReadPolicy.from_json(record["read_policy"])
        state = shard.state()
        since = shard.downgrade_critical_since(CRITICAL_READER_ID, state.since_frontier)
        self._shards[id] = shard
        self._collections[id] = CollectionState(
            description=description,
            shard_id=record["shard_id"],
            read_policy=policy,
            write_frontier=state.upper_frontier,
            implied_capability=since,
            since=since,
        )
        if description.data_source.ingestion is not None:
            self._generators[id] = generator_for(description.data_source.ingestion)
        self._apply_implied_capability(id)

    # ------------------------------------------------------- durable records
    @staticmethod
    def _record_key(id: GlobalId) -> str:
        return f"{COLLECTION_PREFIX}{id}"

    def _read_record(self, id: GlobalId) -> dict[str, Any] | None:
        head = self.persist.consensus.head(self._record_key(id))
        return None if head is None else json.loads(head.data)

    def _update_record(self, key: str, change: dict[str, Any]) -> None:
        consensus = self.persist.consensus
        while True:
            head = consensus.head(key)
            if head is None:
                return
            record = json.loads(head.data) | change
            new = VersionedData(head.seqno + 1, json.dumps(record).encode())
            if consensus.compare_and_set(key, head.seqno, new):
                return

    def _delete_key(self, key: str) -> None:
        consensus = self.persist.consensus
        while (head := consensus.head(key)) is not None:
            if consensus.delete(key, head.seqno):
                return

    # ------------------------------------------------------------- frontiers
    def set_read_policy(self, policies: Sequence[tuple[GlobalId, ReadPolicy]]) -> None:
        """Assign policies (last one wins for a repeated id). A capability that
        is already ahead of the new policy is not moved back."""
        with self._lock:
            for id, _ in policies:
                self._state(id)
            for id, policy in policies:
                self._collections[id].read_policy = policy
                self._update_record(self._record_key(id), {"read_policy": policy.to_json()})
                self._apply_implied_capability(id)

    def update_write_frontiers(self, updates: Sequence[tuple[GlobalId, Frontier]]) -> None:
        """A writer reports a new upper; the implied capability follows the
        read policy, and the since with it (subject to read holds)."""
        with self._lock:
            for id, _ in updates:
                self._state(id)
            for id, upper in updates:
                state = self._state(id)
                state.write_frontier = max(state.write_frontier, upper)
                self._apply_implied_capability(id)

    def _apply_implied_capability(self, id: GlobalId) -> None:
        state = self._collections[id]
        target = min(state.read_policy.frontier(state.write_frontier), state.write_frontier)
        if target > state.implied_capability:
            state.implied_capability = target
            state.since = self._shards[id].downgrade_critical_since(CRITICAL_READER_ID, target)

    def update_read_capabilities(self, updates: Mapping[GlobalId, Counter[int]]) -> None:
        """Apply changes (time -> +/- count) to this process's read holds and
        let the since advance as far as the least remaining hold."""
        with self._lock:
            for id in updates:
                self._state(id)
                holds = self._collections[id].read_holds
                for time_, count in updates[id].items():
                    if holds[time_] + count < 0:
                        raise StorageError(f"read hold count on {id} at {time_} went negative")
            for id, changes in updates.items():
                holds = self._collections[id].read_holds
                for time_, count in changes.items():
                    holds[time_] += count
                    if holds[time_] == 0:
                        del holds[time_]
                self._sync_holds(id)

    def _sync_holds(self, id: GlobalId) -> None:
        state = self._collections[id]
        least = state.least_hold
        reader = self._readers.get(id)
        if least.is_empty:
            if reader is not None:
                reader.expire()
                del self._readers[id]
        else:
            if reader is None:
                reader = self._shards[id].open_leased_reader(
                    lease_ms=self.parameters.reader_lease_ms
                )
                self._readers[id] = reader
            reader.downgrade_since(least)
        state.since = self._shards[id].since()

    def acquire_read_hold(self, id: GlobalId, time: Timestamp | None = None) -> ReadHold:
        """Hold the since of `id` at `time` (default: its current since)."""
        with self._lock:
            state = self._state(id)
            reader = self._readers.get(id)
            wanted = self._shards[id].since() if time is None else Frontier.at(time)
            needs_fresh = reader is None or (
                reader.since.time is not None and wanted < reader.since
            )
            if needs_fresh:
                # A reader's since never moves back, so a hold before it needs a
                # fresh reader, registered at the shard's current since.
                fresh = self._shards[id].open_leased_reader(
                    lease_ms=self.parameters.reader_lease_ms
                )
                at = fresh.since.time if time is None else time
                if at is None or not fresh.since.less_equal(at):
                    fresh.expire()
                    raise ReadBeforeSince(id, -1 if at is None else at, fresh.since)
                fresh.downgrade_since(min(Frontier.at(at), state.least_hold))
                if reader is not None:
                    reader.expire()
                self._readers[id] = reader = fresh
            assert reader is not None
            at = time if time is not None else reader.since.time
            assert at is not None
            state.read_holds[at] += 1
            self._sync_holds(id)
            return ReadHold(self, id, at)

    def acquire_latest_read_hold(self, id: GlobalId) -> tuple[ReadHold, Frontier]:
        """A hold on `id` at its latest readable time (upper - 1; its since
        if nothing later is readable), and that upper. Held at the since
        first and then moved up, so no compaction (of any process) can pass
        the time between reading the upper and holding it."""
        hold = self.acquire_read_hold(id)
        try:
            _, upper = self.collection_frontiers(id)
            if upper.time is not None and upper.time > 0:
                hold.downgrade(upper.time - 1)
        except BaseException:
            hold.release()
            raise
        return hold, upper

    def acquire_dependency_hold(
        self, id: GlobalId, dependent: GlobalId, time: Timestamp
    ) -> DependencyHold:
        """Hold `id` readable at `time` for the materialized view `dependent`,
        durably (read_hold.DependencyHold). Raises ReadBeforeSince if `id`
        has already compacted past `time` and no earlier hold of `dependent`
        kept it."""
        with self._lock:
            self._state(id)
            hold = DependencyHold(self, id, dependent)
            shard = self._shards[id]
            existing = shard.state().critical_readers.get(hold.reader_id)
            if existing is None or existing.since is None or existing.since > time:
                since = shard.since()
                if not since.less_equal(time):
                    raise ReadBeforeSince(id, time, since)
            hold.downgrade(time)
            self._collections[id].since = shard.since()
            return hold

    def collection_frontiers(self, id: GlobalId) -> tuple[Frontier, Frontier]:
        """(since, upper) as they are durably now; refreshes the cached state."""
        with self._lock:
            self._state(id)
            shard_state = self._shards[id].state()
            self._collections[id].since = shard_state.since_frontier
            self.update_write_frontiers([(id, shard_state.upper_frontier)])
            return shard_state.since_frontier, shard_state.upper_frontier

    def collection_statistics(self, id: GlobalId) -> CollectionStatistics:
        with self._lock:
            self._state(id)
            stats = self._shards[id].statistics()
            return CollectionStatistics(stats.rows, stats.bytes, stats.batches)

    # ---------------------------------------------------------- reads/writes
    def append(
        self, commands: Sequence[AppendCommand | tuple], records: Sequence[RecordChange] = ()
    ) -> None:
        """Append to tables (and webhook or introspection collections) as one
        atomic step: every command is checked and encoded first, then one
        compare-and-set makes all of them visible, or none
        (`persist.shard.compare_and_append_all`), together with `records`
        (group commit's timestamp oracle change). InvalidUppers means
        nothing landed."""
        with self._lock:
            planned: list[tuple[GlobalId, Append]] = []
            for raw in commands:
                command = raw if isinstance(raw, AppendCommand) else AppendCommand(*raw)
                state = self._state(command.id)
                if any(command.id == id for id, _ in planned):
                    raise StorageError(f"append names collection {command.id} more than once")
                kind = state.description.data_source.kind
                if kind not in WRITABLE_KINDS:
                    raise NotWritable(command.id, kind.value)
                expected = _frontier(command.expected_upper) or state.write_frontier
                new_upper = _frontier(command.upper)
                assert new_upper is not None
                table = self._checked(command.id, command.updates, expected, new_upper)
                shard = self._shards[command.id]
                planned.append((command.id, Append(shard, table, expected, new_upper)))
            mismatches = []
            try:
                compare_and_append_all([append for _, append in planned], records)
            except persist_errors.UpperMismatch as error:
                id = next(id for id, a in planned if a.shard.shard_id == error.shard_id)
                mismatches.append((id, error.expected, error.current))
            if mismatches:
                self.update_write_frontiers([(id, current) for id, _, current in mismatches])
                raise InvalidUppers(mismatches)
            self.update_write_frontiers([(id, append.new_upper) for id, append in planned])

    def encode(self, id: GlobalId, updates: Sequence[Update]) -> pa.Table | None:
        """`updates` to `id` checked and encoded as a batch table (None if
        there are none), or InvalidUpdate naming the row that can never be
        written (its `row_error` says why). Group commit encodes each
        writer's changes apart, so a bad value fails only its own writer."""
        # A dict read, not `shard()`: encoding must not wait behind an append
        # that holds the lock through its fsyncs (group commit encodes each
        # writer's rows while the leader appends).
        shard = self._shards.get(id)
        if shard is None:
            raise IdentifierMissing(id)
        try:
            return shard.encode(updates)
        except persist_errors.InvalidUpdates as error:
            raise InvalidUpdate(id, str(error), error.row_error) from error

    def _checked(
        self,
        id: GlobalId,
        updates: Sequence[Update] | pa.Table,
        expected: Frontier,
        new_upper: Frontier,
    ) -> pa.Table | None:
        """One command's updates checked against its bounds and encoded."""
        if not isinstance(updates, pa.Table):
            for position, (_, t, _) in enumerate(updates):
                if new_upper.less_equal(t):
                    raise UpdateBeyondUpper(
                        id,
                        f"update {position} at time {t} is not before the new upper {new_upper!r}",
                    )
                if not expected.less_equal(t):
                    raise InvalidUpdate(
                        id, f"update {position} at time {t} is before the upper {expected!r}"
                    )
        table = updates if isinstance(updates, pa.Table) else self.encode(id, updates)
        try:
            return self._shards[id].check_table(table, expected, new_upper)
        except persist_errors.InvalidUpdates as error:
            raise InvalidUpdate(id, str(error), error.row_error) from error

    def snapshot(self, id: GlobalId, as_of: Timestamp) -> list[tuple[Row, int]]:
        """The consolidated contents of `id` at `as_of` (since <= as_of < upper)."""
        return list(self.snapshot_rows(id, as_of))

    def snapshot_rows(self, id: GlobalId, as_of: Timestamp) -> SnapshotRows:
        """Like snapshot, read now but made Python rows a batch at a time as
        they are iterated (persist/shard.py SnapshotRows): a one-off read."""
        return SnapshotRows(self.snapshot_table(id, as_of), self.shard(id).desc.names)

    def snapshot_table(self, id: GlobalId, as_of: Timestamp) -> pa.Table:
        """Like snapshot, as an Arrow table (data columns plus `__diff`)."""
        shard = self.shard(id)
        try:
            return shard.snapshot_table(as_of)
        except persist_errors.ReadBeforeSince as error:
            raise ReadBeforeSince(id, as_of, error.since) from error
        except persist_errors.ReadBeyondUpper as error:
            raise ReadBeyondUpper(id, as_of, error.upper) from error

    # ------------------------------------------------------------ dropping
    def drop_sources(self, identifiers: Sequence[GlobalId]) -> None:
        """Drop collections: release every hold, close the upper, and finalize
        the shard once no other process holds it."""
        with self._lock:
            for id in identifiers:
                self._state(id)
            self.drop_sources_unvalidated(identifiers)

    def drop_sources_unvalidated(self, identifiers: Sequence[GlobalId]) -> None:
        with self._lock:
            for id in identifiers:
                state = self._collections.pop(id, None)
                shard = self._shards.pop(id, None)
                self._generators.pop(id, None)
                if state is None or shard is None:
                    record = self._read_record(id)
                    if record is None:
                        continue
                    shard = self.persist.open_shard(
                        record["shard_id"], RelationDesc.from_json(record["desc"])
                    )
                reader = self._readers.pop(id, None)
                if reader is not None:
                    reader.expire()
                self._retire_shard(shard)
                self._delete_key(self._record_key(id))

    def _retire_shard(self, shard: Shard) -> None:
        try:
            shard.downgrade_critical_since(CRITICAL_READER_ID, Frontier.empty())
            while not (upper := shard.upper()).is_empty:
                try:
                    shard.compare_and_append([], upper, Frontier.empty())
                except persist_errors.UpperMismatch:
                    continue
        except persist_errors.ShardFinalized:
            return  # another process dropped it and finalized it already
        key = f"{FINALIZE_PREFIX}{shard.shard_id}"
        record = json.dumps({"desc": shard.desc.to_json()}).encode()
        self.persist.consensus.compare_and_set(key, None, VersionedData(1, record))
        self._finalize_pending()

    def _finalize_pending(self) -> int:
        done = 0
        for key in self.persist.consensus.list_keys(FINALIZE_PREFIX):
            head = self.persist.consensus.head(key)
            if head is None:
                continue
            shard_id = key[len(FINALIZE_PREFIX) :]
            desc = RelationDesc.from_json(json.loads(head.data)["desc"])
            shard = self.persist.open_shard(shard_id, desc)
            if shard.finalize():
                self.persist.consensus.delete(key, head.seqno)
                done += 1
        return done

    def reconcile_state(self) -> list[GlobalId]:
        """Drop durable collections nobody re-created since this controller
        opened (the adapter has declared everything it wants). Returns them."""
        with self._lock:
            unclaimed = []
            for key in self.persist.consensus.list_keys(COLLECTION_PREFIX):
                id = GlobalId.parse(key[len(COLLECTION_PREFIX) :])
                if id not in self._collections:
                    unclaimed.append(id)
            self.drop_sources_unvalidated(unclaimed)
            return unclaimed

    # ----------------------------------------------------------- processing
    def ready(self, timeout_s: float = 1.0) -> None:
        """Wait until an ingestion tick is due (or `timeout_s` passes)."""
        with self._lock:
            now = now_ms()
            waits = [timeout_s]
            for id in self._generators:
                ingestion = self._collections[id].description.data_source.ingestion
                if ingestion is None or not self._ingestion_runs_here(ingestion.instance_id):
                    continue
                upper = self._collections[id].write_frontier.time
                if upper is None:
                    continue
                due = upper - ingestion.start_ms
                due_at = ingestion.start_ms + (
                    -(-due // ingestion.tick_interval_ms) * ingestion.tick_interval_ms
                )
                waits.append(max(0.0, (due_at - now) / 1000))
        time.sleep(min(waits))

    def _ingestion_runs_here(self, instance_id: str | None) -> bool:
        return instance_id is None or self._instances.get(instance_id) is not None

    def process(self, now: Timestamp | None = None) -> None:
        """Run due ingestion ticks, refresh frontiers."""
        with self._lock:
            at = now_ms() if now is None else now
            for id, generator in list(self._generators.items()):
                ingestion = self._collections[id].description.data_source.ingestion
                assert ingestion is not None
                if not self._ingestion_runs_here(ingestion.instance_id):
                    continue
                upper = ingestion_step(self._shards[id], generator, ingestion, at)
                self.update_write_frontiers([(id, upper)])
            for id in list(self._collections):
                self.collection_frontiers(id)

    def maintain(self) -> MaintenanceReport:
        """The periodic compaction pass: compact every shard whose since has
        moved past its batches (or that has many batches), collect orphaned
        blobs, finalize dropped shards."""
        # Outside the lock: compaction reads and rewrites batches, and every
        # append (group commit) needs the lock; a shard's compaction and its
        # appends are independent compare-and-sets of its state.
        with self._lock:
            shards = [(id, self._shards[id]) for id in self._collections]
        compacted = collected = 0
        for id, shard in shards:
            try:
                shard.expire_lapsed_leases()
                self.collection_frontiers(id)
                compacted += shard.compact(
                    target_rows=self.parameters.compaction_target_rows,
                    max_batches=self.parameters.compaction_max_batches,
                )
                collected += len(shard.collect_garbage())
            except (IdentifierMissing, persist_errors.ShardFinalized):
                continue  # dropped meanwhile
        with self._lock:
            finalized = self._finalize_pending()
        return MaintenanceReport(compacted, collected, finalized)

    def flush_inline(self) -> int:
        """Flush the inline batches of every shard whose backlog of them is
        large (`Shard.flush_inline`), outside the lock: appends go on
        meanwhile. Returns the batches replaced."""
        with self._lock:
            shards = [shard for shard in self._shards.values() if shard.inline_backlog]
        replaced = 0
        for shard in shards:
            try:
                replaced += shard.flush_inline()
            except persist_errors.PersistError as error:  # dropped meanwhile, or lost a race
                log.info("flushing inline batches of %s: %s", shard.shard_id, error)
        return replaced

    # ------------------------------------------------------------ heartbeats
    def _heartbeat_loop(self) -> None:
        interval = self.parameters.reader_lease_ms / 4000
        while not self._closed.wait(interval):
            # Under the lock: a heartbeat racing a downgrade could otherwise
            # leave a stale (lower) cached `reader.since`, and one racing an
            # acquire could heartbeat a reader that was just replaced.
            with self._lock:
                for id, reader in list(self._readers.items()):
                    try:
                        reader.heartbeat()
                    except persist_errors.LeaseExpired:
                        log.error("read holds on %s lapsed: this process paused past its lease", id)
                    except Exception:  # keep heart-beating the others
                        log.exception("heartbeat of reader on %s failed", id)


def table_description(desc: RelationDesc, since: Timestamp | None = None) -> CollectionDescription:
    """Shorthand for a table collection."""
    return CollectionDescription(
        desc, DataSource.table(), None if since is None else Frontier.at(since)
    )
